#pragma once
// One sequence a trainer learns from: tokens with the behaviour log-prob and policy mask of
// each, and the sequence's reward. Rollout produces them (an Episode is one), the trainer
// consumes them; neither module includes the other.
#include <cstdint>
#include <string>
#include <vector>

namespace astraflow {

struct TrainingSample {
  std::uint64_t problem_id = 0;
  std::vector<std::int32_t> tokens;       // <bos> prompt, then turns and observations
  std::vector<float> behav_logprobs;      // per token; 0 where policy_mask is 0
  std::vector<std::uint8_t> policy_mask;  // 1: the policy's own token (trained on); 0: context
  // Per token, the weight version that sampled it as its generator recorded it (-1: a context
  // token, or not recorded); kept only by the runners that record it, else shorter than tokens.
  std::vector<std::int64_t> token_versions;
  double reward = 0.0;
  std::string reward_reason;  // why the environment gave that reward ("correct", "no_answer", …); reports count it
  int turns = 0;
  bool nonfinite = false;  // generation met NaN/inf logits: drop, do not train on it
  bool truncated = false;  // ran out of context or turns without finishing
  bool failed = false;     // the generation backend could not run it (an http server's errors): its task goes back
  // The weight versions an external server reported for its turns (-1: none reported; the rank's
  // own version stands).
  std::int64_t weight_version_min = -1, weight_version_max = -1;
};

}  // namespace astraflow
