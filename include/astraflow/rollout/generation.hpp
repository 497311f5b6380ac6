#pragma once
// The built-in generation engine: batched sampling with a KV cache, temperature and top-p,
// stop tokens, max new tokens; returns the behaviour log-prob of every generated token.
// Seeded through the caller's generator, so a run is reproducible.
#include <cstdint>
#include <vector>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

struct Config;

struct SamplingOptions {
  double temperature = 1.0;
  double top_p = 1.0;
  int max_new_tokens = 8;
  int min_new_tokens = 0;                    // stop tokens are masked out before this many tokens
  bool greedy = false;                       // argmax (evaluation)
  std::vector<std::int32_t> stop_token_ids;  // generation ends after emitting one of these
  bool use_kv_cache = true;                  // false: full forward every step (reference/bench)
};

struct Generation {
  std::vector<std::int32_t> tokens;  // generated tokens, the stop token included
  std::vector<float> logprobs;       // log π(token) under the temperature-scaled distribution
  bool stopped = false;              // ended on a stop token (else max_new_tokens or context end)
  bool nonfinite = false;            // the logits held NaN/inf: the sample is unusable
};

class GenerationEngine {
 public:
  GenerationEngine(PolicyModel model, std::int32_t pad_id);

  // Prompts of any lengths (left-padded internally). Rows that would exceed the model's
  // max_seq_len stop early (stopped = false).
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options, at::Generator& generator);

  PolicyModel& model() { return model_; }

 private:
  PolicyModel model_;
  std::int32_t pad_id_;
};

// The rollout section's sampling settings (temperature, top_p, max_new_tokens).
SamplingOptions samplingFrom(const Config& config);

}  // namespace astraflow
