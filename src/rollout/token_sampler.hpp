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

// logits [B,V] float32 on any device; rows.size() == B.
std::vector<SampledToken> sampleRows(const torch::Tensor& logits, const std::vector<RowSampling>& rows);

}  // namespace astraflow::engine_detail
