#pragma once
// The collectives ZeRO-1 needs over a policy's trainer group (docs/training.md). trainer.grad_sync
// picks the transport as it does for gradient averaging: a c10d group (Gloo on the CPU, NCCL on
// CUDA; trainer/c10d_group.hpp) or the group's MPI communicator; auto is MPI on the CPU (faster
// than Gloo within a node: docs/performance.md) and NCCL on CUDA. Blocking, in place,
// sum-reducing; every rank makes the same calls in the same order.
#include <torch/types.h>

#include <memory>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"

namespace astraflow {

class GroupCollectives {
 public:
  virtual ~GroupCollectives() = default;
  virtual void allreduce(torch::Tensor& t) = 0;
  // t on `root` = Σ_ranks t; elsewhere t is left undefined in value.
  virtual void reduce(torch::Tensor& t, int root) = 0;
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  // `full` is size() equal parts; every rank's part r becomes rank r's. (Parameter sharding's
  // gather of a block.) The default is a broadcast from each rank.
  virtual void allgather(torch::Tensor& full);
  // out = Σ_ranks part rank() of their `full` (out: full.numel() / size() values); `full` is
  // spent. (Parameter sharding's gradient reduction.) The default is a reduce to each rank.
  virtual void reduceScatter(torch::Tensor& full, torch::Tensor& out);
  virtual const char* name() const = 0;  // "gloo", "nccl", "mpi"
  virtual int rank() const = 0;
  virtual int size() const = 0;
};

// Whether trainer.grad_sync `kind` means MPI for a trainer on `device`: mpi, or auto on the CPU
// (where MPI beats Gloo's TCP transport within a node: profiling/bench_grad_sync.cpp); NCCL on
// CUDA keeps the gradients on the GPU.
inline bool gradSyncUsesMpi(TrainerSection::GradSync kind, const torch::Device& device) {
  return kind == TrainerSection::GradSync::Mpi || (kind == TrainerSection::GradSync::Auto && device.is_cpu());
}

// Collective over `group` (every member calls it with the same kind).
std::unique_ptr<GroupCollectives> makeGroupCollectives(const Comm& group, TrainerSection::GradSync kind,
                                                       const torch::Device& device);

}  // namespace astraflow
