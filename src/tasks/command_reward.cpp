// The `command` reward (include/astraflow/tasks/command_reward.hpp): the process runner with
// no isolation — the verifier is the user's own program — and its one-object answer parsed.
#include "astraflow/tasks/command_reward.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/process_runner.hpp"

namespace astraflow {
RewardResult commandVerdict(const std::string& out) {
  const RewardResult invalid{0.0, RewardReason::Invalid, ""};
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("reward") || !j["reward"].is_number()) return invalid;
  const double reward = j["reward"].get<double>();
  if (!std::isfinite(reward)) return invalid;
  RewardResult r{reward, reward > 0 ? RewardReason::Correct : RewardReason::Wrong, ""};
  if (j.contains("reason")) {
    const auto reason = j["reason"].is_string() ? rewardReasonFromName(j["reason"].get<std::string>()) : std::nullopt;
    if (!reason) return invalid;
    r.reason = *reason;
  }
  if (j.contains("answer")) {
    if (!j["answer"].is_string()) return invalid;
    r.answer = j["answer"].get<std::string>();
  }
  return r;
}

RewardResult commandReward(const std::string& input_json, const CommandRewardOptions& options) {
  if (options.argv.empty()) throw Error("the command reward has no command to run");
  if (!(options.timeout_seconds > 0)) throw Error("the command reward's timeout must be positive");
  detail::ProcessSpec spec;
  spec.executable = detail::findExecutable(options.argv.front());
  spec.argv = options.argv;
  spec.stdin_text = input_json;
  spec.wall_seconds = options.timeout_seconds;
  spec.output_bytes = kCommandAnswerBytes;
  const detail::ProcessResult run = detail::runProcess(spec);
  if (run.timed_out) return {0.0, RewardReason::Timeout, ""};
  if (run.output_limit) return {0.0, RewardReason::Invalid, ""};
  if (run.signal != 0 || run.exit_code != 0) return {0.0, RewardReason::Crashed, ""};
  return commandVerdict(run.out);
}

}  // namespace astraflow
