#pragma once
// What one sequence's sampling is asked for and what it gives back: shared by the engine's
// batch call (generation.hpp), its scheduler (sequence_scheduler.hpp) and every backend.
#include <cstdint>
#include <optional>
#include <vector>

namespace astraflow {

struct SamplingOptions {
  double temperature = 1.0;
  double top_p = 1.0;
  int max_new_tokens = 8;
  int min_new_tokens = 0;                      // stop tokens are masked out before this many tokens
  bool greedy = false;                         // argmax (evaluation)
  std::vector<std::int32_t> stop_token_ids;    // generation ends after emitting one of these
  std::vector<std::int32_t> banned_token_ids;  // never drawn (a request's logit_bias ban), besides the model's own
  bool use_kv_cache = true;                    // false: full forward every step (reference/bench)
};

struct Generation {
  std::vector<std::int32_t> tokens;  // generated tokens, the stop token included
  std::vector<float> logprobs;       // log π(token) under the temperature-scaled distribution
  bool stopped = false;              // ended on a stop token (else max_new_tokens or context end)
  bool nonfinite = false;            // the logits held NaN/inf: the sample is unusable
  bool ended_by_caller = false;      // RowControl::on_token ended it (stopped is set too)
  bool failed = false;               // a backend could not produce it (an http server's errors past the retries)
  std::int64_t weight_version = -1;  // the version an external server reported for it (-1: not reported)
  // Per token, the weight version that sampled it, where the generator knows it (the continuous
  // engine: the version its scheduler was told; -1 before any). Empty: not recorded per token.
  std::vector<std::int64_t> token_versions;
  // A simulated backend's drawn reward: the episode ends with it instead of the environment's
  // verdict on the (synthetic) text.
  std::optional<double> reward;
};

}  // namespace astraflow
