#include "dataflow/eval_scheduler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace astraflow::dataflow_detail {

std::vector<Task> EvalScheduler::start(std::int64_t min_version,
                                       const std::function<Task(std::uint64_t k)>& make_task) {
  EvalRound round;
  round.min_version = min_version;
  round.expected = static_cast<std::size_t>(problems_);
  round.t_start = ctx_.now();
  const std::size_t index = rounds_.size();
  rounds_.push_back(round);
  std::vector<Task> tasks;
  for (int k = problems_ - 1; k >= 0; --k) {
    Task t = make_task(static_cast<std::uint64_t>(k));
    t.metadata[kTaskEvalKey] = std::to_string(index);
    t.metadata[kTaskMinVersionKey] = std::to_string(min_version);
    tasks_[t.task_id] = {index, per_task_};
    tasks.push_back(std::move(t));
  }
  return tasks;
}

bool EvalScheduler::take(const Trajectory& t) {
  const auto it = tasks_.find(t.task_id);
  if (it == tasks_.end()) return false;
  auto& round = rounds_[it->second.first];
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  if (!t.role.empty() && !t.rewards.empty()) round.role_reward[t.role] += finite(t.rewards[0]);
  ++received_;
  if (--it->second.second > 0) return true;  // the team's other roles are still to come
  tasks_.erase(it);
  ++round.received;
  // A team trajectory carries {role reward, team reward}; a single-agent one {reward}.
  round.correct += t.rewards.empty() ? 0.0 : finite(t.rewards.back());
  round.version_low = std::min(round.version_low, t.weight_version_min);
  round.version_high = std::max(round.version_high, t.weight_version_max);
  if (!round.done()) return true;
  spans_.emplace_back(round.t_start, ctx_.now());
  // count: the problems solved (the round's summed 0/1 rewards) of `total`: accuracy = count / total.
  ctx_.event("eval", round.t_start, round.version_high, 0, static_cast<std::uint64_t>(std::llround(round.correct)),
             {.total = static_cast<std::uint64_t>(round.expected)});
  std::string roles;  // each role's own mean reward, for a team
  for (const auto& [role, sum] : round.role_reward) {
    roles += fmt::format("{}{} {:.3f}", roles.empty() ? "; " : ", ", role, sum / static_cast<double>(round.expected));
  }
  spdlog::info("eval: held-out greedy {} {:.3f} on {} problems (weights v{}{}{})",
               roles.empty() ? "accuracy" : "team accuracy", round.accuracy(), round.expected, round.version_low,
               round.version_low == round.version_high ? "" : fmt::format("..v{}", round.version_high), roles);
  return true;
}

double EvalScheduler::startAccuracy() const {
  if (start_accuracy_ >= 0) return start_accuracy_;
  return !rounds_.empty() && rounds_.front().done() ? rounds_.front().accuracy() : -1.0;
}

double EvalScheduler::endAccuracy() const {
  return !rounds_.empty() && rounds_.back().done() ? rounds_.back().accuracy() : -1.0;
}

double EvalScheduler::roleReward(const std::string& role, bool last) const {
  // A resumed run's first round is not this segment's start.
  if (rounds_.empty() || (!last && resumed_)) return -1.0;
  const EvalRound& round = last ? rounds_.back() : rounds_.front();
  if (!round.done() || round.expected == 0) return -1.0;
  const auto it = round.role_reward.find(role);
  return it == round.role_reward.end() ? 0.0 : it->second / static_cast<double>(round.expected);
}

const EvalRound* EvalScheduler::latestDone() const {
  for (auto it = rounds_.rbegin(); it != rounds_.rend(); ++it) {
    if (it->done()) return &*it;
  }
  return nullptr;
}

}  // namespace astraflow::dataflow_detail
