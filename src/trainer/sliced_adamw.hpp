#pragma once
// torch::optim::AdamW's step, taken a bounded slice of each parameter at a time. AdamW's own step
// forms its denominator as (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps): two
// temporaries of the whole parameter alive together, 1.16 GiB for a 151,936 × 1024 float32
// embedding — the largest transient of a non-sharded trainer step (docs/performance.md). The
// same arithmetic over slices bounds them by the slice.
#include <torch/optim/adamw.h>

#include <cstdint>

namespace astraflow {

// One step of `adam` over its parameters' gradients, `slice_bytes` of each parameter at a time:
// the state it reads and writes is adam's own (made as AdamW makes it at a parameter's first
// step), so checkpoints and optimizer.state() see no difference. AMSGrad is not sliced (AdamW's
// own step runs).
void slicedAdamWStep(torch::optim::AdamW& adam, std::int64_t slice_bytes = std::int64_t{64} << 20);

// Σ t² in double, from float sums over slices of `slice_bytes`: no temporary of t's size (t.pow(2)
// would be one).
double slicedSumOfSquares(const torch::Tensor& t, std::int64_t slice_bytes = std::int64_t{64} << 20);

}  // namespace astraflow
