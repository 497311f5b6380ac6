#pragma once
// One entry to every reward function (docs/tasks.md): the `dataset` environment and `astraflow
// reward` score a response by a RewardSpec (config `environment.reward`) through it.
#include <memory>
#include <string_view>

#include "astraflow/core/environment_options.hpp"
#include "astraflow/tasks/code_reward.hpp"
#include "astraflow/tasks/command_reward.hpp"
#include "astraflow/tasks/reward.hpp"
#include "astraflow/tasks/reward_worker.hpp"

namespace astraflow {

// What a reward function may read of the row a response answers.
struct RewardInput {
  std::string_view response;
  std::string_view reference;      // the row's answer (math, exact, choice, command)
  std::string_view tests_json;     // code: the row's tests (a JSON list)
  std::string_view prompt;         // command: the prompt as the policy saw it
  std::string_view metadata_json;  // command: the row's other fields (a JSON object)
};

CodeRewardOptions codeRewardOptions(const RewardSpec& spec);
CommandRewardOptions commandRewardOptions(const RewardSpec& spec);
RewardWorkerOptions rewardWorkerOptions(const RewardSpec& spec);  // persistent: one worker

// The reward of one RewardSpec, its pattern compiled once (per process: equal patterns share one
// compiled copy). Throws Error at construction naming environment.reward.pattern when the
// pattern cannot work; after that a response that fails is a reward with its reason.
class RewardFunction {
 public:
  explicit RewardFunction(RewardSpec spec);

  // The reward of spec.kind. Past spec.timeout_seconds: reward 0, reason `timeout`. Throws Error
  // only for a configuration that cannot work (a command that cannot be started).
  RewardResult score(const RewardInput& input) const;
  const RewardSpec& spec() const { return spec_; }

 private:
  RewardResult scoreKind(const RewardInput& input) const;

  RewardSpec spec_;
  std::shared_ptr<const TextPattern> pattern_;  // math's fallback or regex's pattern; null when none
  std::shared_ptr<RewardWorkerPool> workers_;   // a persistent command's
  std::shared_ptr<HttpRewardPool> http_;        // kind http's
};

}  // namespace astraflow
