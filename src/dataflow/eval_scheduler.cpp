// EvalScheduler: the dataflow rank's held-out evaluation rounds: the tasks of a round, which trajectories answer it,
// and each round's accuracy and pass@k, logged and traced as it completes.
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
  round.expected = static_cast<std::size_t>(problems_) * static_cast<std::size_t>(samples_);
  round.solved.assign(static_cast<std::size_t>(problems_), 0);
  round.t_start = ctx_.now();
  const std::size_t index = rounds_.size();
  rounds_.push_back(round);
  std::vector<Task> tasks;
  for (int k = problems_ - 1; k >= 0; --k) {
    for (int s = samples_ - 1; s >= 0; --s) {
      Task t = make_task(static_cast<std::uint64_t>(k));
      t.group_index = static_cast<std::uint32_t>(s);
      t.metadata[kTaskEvalKey] = std::to_string(index);
      t.metadata[kTaskMinVersionKey] = std::to_string(min_version);
      tasks_[t.task_id] = {index, per_task_, static_cast<std::size_t>(k)};
      tasks.push_back(std::move(t));
    }
  }
  return tasks;
}

bool EvalScheduler::take(const Trajectory& t) {
  const auto it = tasks_.find(t.task_id);
  if (it == tasks_.end()) return false;
  auto& round = rounds_[it->second.round];
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  if (!t.role.empty() && !t.rewards.empty()) round.role_reward[t.role] += finite(t.rewards[0]);
  ++received_;
  if (--it->second.remaining > 0) return true;  // the team's other roles are still to come
  const std::size_t problem = it->second.problem;
  tasks_.erase(it);
  ++round.received;
  // A team trajectory carries {role reward, team reward}; a single-agent one {reward}.
  const double reward = t.rewards.empty() ? 0.0 : finite(t.rewards.back());
  round.correct += reward;
  if (reward >= 1.0) round.solved[problem] = 1;
  round.version_low = std::min(round.version_low, t.weight_version_min);
  round.version_high = std::max(round.version_high, t.weight_version_max);
  if (!round.done()) return true;
  spans_.emplace_back(round.t_start, ctx_.now());
  // count: the problems solved (the round's summed 0/1 rewards) of `total`: accuracy = count / total.
  ctx_.event(TraceKind::Eval, round.t_start, round.version_high, 0,
             static_cast<std::uint64_t>(std::llround(round.correct)),
             {.total = static_cast<std::uint64_t>(round.expected)});
  std::string roles;  // each role's own mean reward, for a team
  for (const auto& [role, sum] : round.role_reward) {
    roles += fmt::format("{}{} {:.3f}", roles.empty() ? "; " : ", ", role, sum / static_cast<double>(round.expected));
  }
  const std::string versions =
      fmt::format("v{}{}", round.version_low,
                  round.version_low == round.version_high ? "" : fmt::format("..v{}", round.version_high));
  if (samples_ == 1) {
    spdlog::info("eval: held-out {} {} {:.3f} on {} problems (weights {}{})",
                 ctx_.cfg.eval.temperature == 0.0 ? "greedy" : "sampled", roles.empty() ? "accuracy" : "team accuracy",
                 round.accuracy(), round.expected, versions, roles);
    return true;
  }
  // count: the problems with a sample of full reward, of `total` problems.
  ctx_.event(TraceKind::EvalPassAtK, round.t_start, round.version_high, 0,
             static_cast<std::uint64_t>(std::count(round.solved.begin(), round.solved.end(), 1)),
             {.total = round.solved.size()});
  spdlog::info("eval: held-out pass@1 (avg@{}) {:.3f}, pass@{} {:.3f} on {} problems at temperature {} (weights {}{})",
               samples_, round.accuracy(), samples_, round.passAtK(), problems_, ctx_.cfg.eval.temperature, versions,
               roles);
  return true;
}

double EvalRound::passAtK() const {
  if (solved.empty()) return 0.0;
  return static_cast<double>(std::count(solved.begin(), solved.end(), 1)) / static_cast<double>(solved.size());
}

double EvalScheduler::endPassAtK() const {
  return !rounds_.empty() && rounds_.back().done() ? rounds_.back().passAtK() : -1.0;
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
