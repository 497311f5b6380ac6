#pragma once
// The built-in generation engine: batched sampling with a KV cache, temperature and top-p,
// stop tokens, max new tokens; returns the behaviour log-prob of every generated token.
// Seeded through the caller's generator, so a run is reproducible.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

struct Config;

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
  // A simulated backend's drawn reward: the episode ends with it instead of the environment's
  // verdict on the (synthetic) text.
  std::optional<double> reward;
};

// Per-row control of one generate() call (`astraflow serve` batches requests that each have
// their own limit and stop strings).
struct RowControl {
  std::vector<int> max_new_tokens;  // per row; empty: options.max_new_tokens for every row
  // After each token a row draws; false ends the row there (stopped, ended_by_caller).
  std::function<bool(std::size_t row, std::int32_t token, float logprob)> on_token;
};

class GenerationEngine {
 public:
  GenerationEngine(PolicyModel model, std::int32_t pad_id);

  // Prompts of any lengths (left-padded internally). Rows that would exceed the model's
  // max_seq_len stop early (stopped = false).
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options, at::Generator& generator,
                                   const RowControl& control = {});

  PolicyModel& model() { return model_; }

 private:
  PolicyModel model_;
  std::int32_t pad_id_;
};

// The rollout section's sampling settings (temperature, top_p, max_new_tokens).
SamplingOptions samplingFrom(const Config& config);

}  // namespace astraflow
