#pragma once
// Agent episodes against an environment: the single- and multi-turn workflow of a RaaS
// rank. Policy tokens carry behaviour log-probs and mask 1; prompt and environment tokens
// carry mask 0 (never trained on).
#include <cstdint>
#include <string>
#include <vector>

#include "astraflow/rollout/environment.hpp"
#include "astraflow/rollout/generation.hpp"
#include "astraflow/rollout/tokenizer.hpp"

namespace astraflow {

struct Episode {
  std::uint64_t problem_id = 0;
  std::vector<std::int32_t> tokens;    // <bos> prompt, then turns and observations
  std::vector<float> behav_logprobs;   // per token; 0 where policy_mask is 0
  std::vector<std::uint8_t> policy_mask;
  double reward = 0.0;
  int turns = 0;
  bool nonfinite = false;  // generation met NaN/inf logits: drop, do not train on it
  bool truncated = false;  // ran out of context or turns without finishing
};

// Runs one episode per problem id, batching the generation of all unfinished episodes turn
// by turn.
std::vector<Episode> runEpisodes(GenerationEngine& engine, const Tokenizer& tokenizer,
                                 const EnvironmentOptions& env_options, const std::vector<std::uint64_t>& problem_ids,
                                 const SamplingOptions& sampling, at::Generator& generator);

// The episode a perfect agent produces (the environment's reference actions), for warm-start
// SFT: same token layout and masks as runEpisodes.
Episode referenceEpisode(const Tokenizer& tokenizer, const EnvironmentOptions& env_options, std::uint64_t problem_id);

}  // namespace astraflow
