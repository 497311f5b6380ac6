#pragma once
// One token per row from a step's logits, each row with its own options and its own uniform
// draw (docs/rollout-backends.md, "The continuous engine"): a row's token depends on its logits
// and its draw only, never on the rows beside it. Private to the rollout module.
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace astraflow::engine_detail {

struct RowSampling {
  double temperature = 1.0;
  double top_p = 1.0;
  bool greedy = false;
  const std::vector<std::int32_t>* masked = nullptr;  // token ids drawn with probability 0 (banned, early stops)
  double uniform = 0.0;                               // in [0, 1): the row's draw
};

struct SampledToken {
  std::int32_t token = 0;
  float logprob = 0;   // log π(token) under the temperature-scaled, masked distribution
  bool finite = true;  // false: the logits held NaN or +inf, the token is meaningless
};

// logits [B,V] float32 on any device; rows.size() == B. Not changed. A row whose logits hold NaN
// or +inf, or whose every token is masked, comes back not finite. On the CPU, rows without top-p
// go through sampleRowsOnCpu; the others, and every row on a GPU, through sampleRowsWithTensors.
std::vector<SampledToken> sampleRows(const torch::Tensor& logits, const std::vector<RowSampling>& rows);

// LibTorch operations on the whole [B,V] block: any device, every option (token_sampler.cpp).
std::vector<SampledToken> sampleRowsWithTensors(const torch::Tensor& logits, const std::vector<RowSampling>& rows);

// One pass over each row from memory, the rest in cache (token_sampler_cpu.cpp): CPU float32
// logits, rows without top-p. The same distribution and inverse-CDF rule as the tensor path.
bool cpuSamplingApplies(const torch::Tensor& logits);
std::vector<SampledToken> sampleRowsOnCpu(const torch::Tensor& logits, const std::vector<RowSampling>& rows);

}  // namespace astraflow::engine_detail
