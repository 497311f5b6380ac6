#pragma once
// One c10d process group over the members of an MPI group (docs/gpu.md): Gloo when the tensors
// live on the CPU, NCCL (through the CUDA plug-in) on CUDA. Owns the TCPStore its members meet
// through and the backend; the collectives below are blocking, in place and sum-reducing.
#include <torch/types.h>

#include <memory>

#include "astraflow/comm/comm.hpp"
#include "astraflow/trainer/group_collectives.hpp"

namespace astraflow {

class C10dGroup final : public GroupCollectives {
 public:
  // Collective over `group`. Rank 0 of the group opens a TCPStore on an ephemeral port of its
  // host and shares host:port over MPI (ASTRAFLOW_C10D_HOST overrides the host name it
  // announces; GLOO_SOCKET_IFNAME picks Gloo's interface). Throws Error when it cannot form.
  C10dGroup(const Comm& group, const torch::Device& device);
  ~C10dGroup() override;
  C10dGroup(const C10dGroup&) = delete;
  C10dGroup& operator=(const C10dGroup&) = delete;

  void allreduce(torch::Tensor& t) override;
  void reduce(torch::Tensor& t, int root) override;
  void broadcast(torch::Tensor& t, int root) override;
  const char* name() const override;  // "gloo" or "nccl"
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, size_;
};

}  // namespace astraflow
