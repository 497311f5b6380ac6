#pragma once
// The start-up check of an inference server's log-probs (docs/rollout-backends.md, "Log-probs
// checked at start"): after a server first confirmed a version, a short answer it samples is
// scored by this rank's model with the same weights, as the trainer will score it. Private to
// src/rollout.
#include <cstddef>
#include <span>
#include <string>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/rollout/generation.hpp"
#include "astraflow/rollout/generation_backend.hpp"

namespace astraflow::rollout_detail {

struct ProbeResult {
  bool ran = false;        // false: the server gave no answer (its faults are counted elsewhere)
  std::size_t tokens = 0;  // sampled tokens compared
  double mean_abs = 0.0;   // mean |server's log-prob - the model's| over them
  double max_abs = 0.0;
};

// `blob`: the version the server confirmed (the store's bf16 bytes, unpacked into `model` here);
// `options`: the run's sampling (temperature, top_p), 16 new tokens at most.
ProbeResult probeServerLogprobs(HttpBackend& server, PolicyModelImpl& model, std::span<const std::byte> blob,
                                SamplingOptions options);

}  // namespace astraflow::rollout_detail
