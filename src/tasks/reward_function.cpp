// RewardFunction: every reward kind behind one entry (include/astraflow/tasks/reward_function.hpp).
#include "astraflow/tasks/reward_function.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "astraflow/core/error.hpp"

namespace astraflow {

CodeRewardOptions codeRewardOptions(const RewardSpec& spec) {
  CodeRewardOptions o;
  o.interpreter = spec.interpreter;
  o.all_or_nothing = spec.all_or_nothing;
  o.limits.wall_seconds = spec.wall_seconds;
  o.total_wall_seconds = spec.timeout_seconds;
  o.limits.memory_bytes = spec.memory_mb << 20;
  return o;
}

CommandRewardOptions commandRewardOptions(const RewardSpec& spec) {
  return {spec.command, std::min(spec.command_timeout, spec.timeout_seconds)};
}

namespace {

// Compiled patterns by their text, shared by every RewardFunction of the process: environments
// are made per episode, and a pattern is compiled once. Bounded: `astraflow reward` may get a
// pattern per input line.
std::shared_ptr<const TextPattern> compiledPattern(const std::string& pattern) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const TextPattern>> cache;
  constexpr std::size_t kMaxPatterns = 256;
  std::lock_guard lock(mutex);
  if (const auto it = cache.find(pattern); it != cache.end()) return it->second;
  auto compiled = std::make_shared<const TextPattern>(pattern, "environment.reward.pattern");
  if (cache.size() >= kMaxPatterns) cache.clear();
  cache.emplace(pattern, compiled);
  return compiled;
}

// What a verifier reads, one line of JSON (control characters escaped, so no newline inside):
// {"prompt", "response", "reference", "metadata"}, the same for every way it runs.
std::string verifierInput(const RewardInput& in) {
  using nlohmann::ordered_json;
  const ordered_json metadata =
      in.metadata_json.empty() ? ordered_json::object() : ordered_json::parse(in.metadata_json, nullptr, false);
  const ordered_json task{{"prompt", in.prompt},
                          {"response", in.response},
                          {"reference", in.reference},
                          {"metadata", metadata.is_discarded() ? ordered_json::object() : metadata}};
  return task.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace

RewardWorkerOptions rewardWorkerOptions(const RewardSpec& spec) {
  RewardWorkerOptions o;
  o.argv = spec.command;
  o.timeout_seconds = std::min(spec.command_timeout, spec.timeout_seconds);
  o.max_items = spec.max_items;
  return o;
}

RewardFunction::RewardFunction(RewardSpec spec) : spec_(std::move(spec)) {
  // The process's pools: environments are made per episode, the worker and connections stay.
  if (spec_.kind == RewardKind::Command && spec_.persistent)
    workers_ = sharedRewardWorkerPool(rewardWorkerOptions(spec_));
  if (spec_.kind == RewardKind::Http) http_ = sharedHttpRewardPool({spec_.url, 1, spec_.timeout_seconds});
  if (!spec_.pattern.empty() && (spec_.kind == RewardKind::Math || spec_.kind == RewardKind::Regex))
    pattern_ = compiledPattern(spec_.pattern);
  if (spec_.kind == RewardKind::Regex && !pattern_)
    throw Error("environment.reward.pattern is required with kind: regex");
  if (spec_.kind == RewardKind::Math && pattern_ && pattern_->groupCount() < 1)
    throw Error(
        fmt::format("environment.reward.pattern '{}' needs a capturing group with kind: math (its first "
                    "group is the answer)",
                    spec_.pattern));
}

RewardResult RewardFunction::score(const RewardInput& in) const {
  const auto start = std::chrono::steady_clock::now();
  RewardResult result = scoreKind(in);
  // The programs (code, command) are killed at the limit; the in-process kinds are linear in
  // the response and are held to the same limit when they return.
  if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > spec_.timeout_seconds)
    return {0.0, RewardReason::Timeout, ""};
  return result;
}

RewardResult RewardFunction::scoreKind(const RewardInput& in) const {
  const RewardSpec& spec = spec_;
  if (spec.kind == RewardKind::Math) {
    MathRewardOptions o;
    o.fallback = pattern_;
    o.decimals = spec.decimals;
    return mathReward(in.response, in.reference, o);
  }
  if (spec.kind == RewardKind::Exact) return exactReward(in.response, in.reference);
  if (spec.kind == RewardKind::Regex) return regexReward(in.response, *pattern_);
  if (spec.kind == RewardKind::Choice) return choiceReward(in.response, in.reference);
  if (spec.kind == RewardKind::Code) return scoreCode(in.response, in.tests_json, codeRewardOptions(spec)).result;
  if (spec.kind == RewardKind::Command && workers_) return workers_->score(verifierInput(in));
  if (spec.kind == RewardKind::Command) return commandReward(verifierInput(in), commandRewardOptions(spec));
  if (spec.kind == RewardKind::Http) return http_->score(verifierInput(in));
  return {0.0, RewardReason::Invalid, ""};
}

}  // namespace astraflow
