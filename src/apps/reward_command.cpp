#include "apps/reward_command.hpp"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/json_lines.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/reward.hpp"

namespace astraflow {

struct RewardArgs {
  std::string kind;
  std::string reference;  // default reference (a line's "reference" wins)
  std::string pattern;    // regex: the pattern; math: the fallback answer pattern
  double tolerance = 1e-6;
};

namespace {

using json = nlohmann::ordered_json;

// One {"response": ..., "reference": ...} per line of stdin; one {"reward", "reason", "answer"}
// line per input (answerJsonLines: bad lines are answered in place, exit 3).
int rewardCommand(const RewardArgs& a) {
  return answerJsonLines("reward", [&](const json& input) {
    if (!input.is_object() || !input.contains("response") || !input["response"].is_string())
      throw Error("a line is {\"response\": \"...\", \"reference\": \"...\"}");
    const std::string response = input["response"].get<std::string>();
    const std::string reference = input.value("reference", a.reference);
    RewardResult r;
    if (a.kind == "math") {
      MathRewardOptions o;
      if (!a.pattern.empty()) o.fallback_pattern = a.pattern;
      o.relative_tolerance = a.tolerance;
      r = mathReward(response, reference, o);
    } else if (a.kind == "exact") {
      r = exactReward(response, reference);
    } else if (a.kind == "regex") {
      r = regexReward(response, input.value("pattern", a.pattern));
    } else {
      r = choiceReward(response, reference);
    }
    return json{{"reward", r.reward}, {"reason", rewardReasonName(r.reason)}, {"answer", r.answer}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
  });
}

}  // namespace

RewardCommand addRewardCommand(CLI::App& app) {
  RewardCommand c;
  c.args = std::make_shared<RewardArgs>();
  RewardArgs& a = *c.args;
  auto* cmd = app.add_subcommand("reward",
                                 "score responses with a verifiable reward; stdin: one {\"response\": ..., "
                                 "\"reference\": ...} per line (docs/tasks.md)");
  cmd->add_option("--kind", a.kind, "math, exact, regex or choice")
      ->required()
      ->check(CLI::IsMember({"math", "exact", "regex", "choice"}));
  cmd->add_option("--reference", a.reference, "the reference for lines that carry none");
  cmd->add_option("--pattern", a.pattern,
                  "regex: the pattern to find; math: the answer pattern used without \\boxed{}");
  cmd->add_option("--tolerance", a.tolerance, "math: relative tolerance of numeric answers (default 1e-6)")
      ->check(CLI::Range(0.0, 1.0));
  c.command = cmd;
  return c;
}

int RewardCommand::run() const {
  if (command && *command) return rewardCommand(*args);
  return -1;
}

}  // namespace astraflow
