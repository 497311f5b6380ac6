#include "astraflow/tasks/reward_function.hpp"

#include <nlohmann/json.hpp>

namespace astraflow {

CodeRewardOptions codeRewardOptions(const RewardSpec& spec) {
  CodeRewardOptions o;
  o.interpreter = spec.interpreter;
  o.all_or_nothing = spec.all_or_nothing;
  o.limits.wall_seconds = spec.wall_seconds;
  o.limits.memory_bytes = spec.memory_mb << 20;
  return o;
}

CommandRewardOptions commandRewardOptions(const RewardSpec& spec) { return {spec.command, spec.command_timeout}; }

RewardResult scoreResponse(const RewardSpec& spec, const RewardInput& in) {
  if (spec.kind == "math") {
    MathRewardOptions o;
    if (!spec.pattern.empty()) o.fallback_pattern = spec.pattern;
    o.relative_tolerance = spec.tolerance;
    return mathReward(in.response, in.reference, o);
  }
  if (spec.kind == "exact") return exactReward(in.response, in.reference);
  if (spec.kind == "regex") return regexReward(in.response, spec.pattern);
  if (spec.kind == "choice") return choiceReward(in.response, in.reference);
  if (spec.kind == "code") return scoreCode(in.response, in.tests_json, codeRewardOptions(spec)).result;
  if (spec.kind == "command") {
    using json = nlohmann::ordered_json;
    const json metadata = in.metadata_json.empty() ? json::object() : json::parse(in.metadata_json, nullptr, false);
    const json task{{"prompt", in.prompt},
                    {"response", in.response},
                    {"reference", in.reference},
                    {"metadata", metadata.is_discarded() ? json::object() : metadata}};
    return commandReward(task.dump(-1, ' ', false, json::error_handler_t::replace), commandRewardOptions(spec));
  }
  return {0.0, RewardReason::Invalid, ""};
}

}  // namespace astraflow
