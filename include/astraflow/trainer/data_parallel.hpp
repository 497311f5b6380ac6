#pragma once
// Data parallelism within one policy's trainer group (docs/architecture.md §7): every rank computes
// gradients on its own batch; the group averages them before the optimiser step, so the
// ranks' weights stay bit-identical.
#include <torch/types.h>

#include "astraflow/comm/comm.hpp"

namespace astraflow {

// Collective over `comm`; same order on all ranks. Averages the gradients of `parameters`
// (undefined gradients count as zeros) across the group, together with a flag of whether each
// rank's loss was finite; returns false on every rank when any rank's loss or gradient was
// NaN/inf (then the caller skips the step everywhere). Uses reduce-to-root + broadcast rather
// than MPI_Allreduce: the standard does not require an allreduce to give bitwise the same sum
// on every rank, and identical weights need identical gradients.
bool averageGradients(const std::vector<torch::Tensor>& parameters, bool local_loss_finite, const Comm& comm);

}  // namespace astraflow
