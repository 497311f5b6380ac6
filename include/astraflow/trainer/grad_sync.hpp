#pragma once
// How a data-parallel trainer group averages its gradients (trainer.grad_sync, docs/gpu.md):
// through a c10d process group — Gloo when the trainer is on the CPU, NCCL on CUDA — or
// through the group's MPI communicator (reduce to rank 0 + broadcast).
#include <torch/types.h>

#include <memory>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"

namespace astraflow {

class GradientAverager {
 public:
  virtual ~GradientAverager() = default;
  // Collective over the group; same order on all ranks. Averages the gradients of
  // `parameters` (undefined gradients count as zeros) together with a flag of whether each
  // rank's loss was finite; false on every rank when any rank's loss or gradient was NaN/inf
  // (the caller then skips the step everywhere). Every rank ends with bit-identical gradients.
  virtual bool average(const std::vector<torch::Tensor>& parameters, bool local_loss_finite) = 0;
  virtual const char* backend() const = 0;  // "gloo", "nccl", "mpi"
};

// Collective over `group` (every member calls it, with the same kind). auto: MPI on the CPU,
// NCCL on CUDA. For c10d, rank 0 of the
// group opens a TCPStore on an ephemeral port of its host and shares host:port over MPI, and
// the group's members join a Gloo (device cpu) or NCCL (cuda) process group through it.
// ASTRAFLOW_C10D_HOST overrides the host name rank 0 announces; GLOO_SOCKET_IFNAME picks the
// interface Gloo uses. Throws Error when the group cannot form.
std::unique_ptr<GradientAverager> makeGradientAverager(const Comm& group, TrainerSection::GradSync kind,
                                                       const torch::Device& device);

}  // namespace astraflow
