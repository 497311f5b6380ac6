// EvalScheduler: the dataflow rank's evaluation rounds: the tasks of a round, which trajectories answer it, and each
// set's accuracy and pass@k with their mean, logged and traced as a round completes.
#include "dataflow/eval_scheduler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace astraflow::dataflow_detail {

std::vector<Task> EvalScheduler::start(std::int64_t min_version,
                                       const std::function<Task(std::size_t set, std::uint64_t k)>& make_task) {
  EvalRound round;
  round.min_version = min_version;
  round.result.t_start = ctx_.now();
  round.result.version_low = std::numeric_limits<std::int64_t>::max();
  round.result.version_high = -1;
  const std::size_t index = rounds_.size();
  std::vector<Task> tasks;
  for (std::size_t s = 0; s < plans_.size(); ++s) {
    const EvalSetPlan& plan = plans_[s];
    round.result.sets.push_back({plan.name, plan.problems, plan.samples, 0.0, 0.0});
    for (std::uint64_t k = 0; k < plan.problems; ++k) {
      const std::size_t problem = round.result.problems.size();
      EvalProblemResult p;
      p.set = static_cast<std::uint32_t>(s);
      p.index = k;
      p.rewards.assign(plan.samples, std::nan(""));
      p.responses.assign(plan.samples, std::string());
      for (std::uint32_t sample = 0; sample < plan.samples; ++sample) {
        Task t = make_task(plan.set, k);
        p.problem_id = t.problem_id;
        t.group_index = sample;
        t.metadata[kTaskEvalKey] = std::to_string(index);
        t.metadata[kTaskMinVersionKey] = std::to_string(min_version);
        tasks_[t.task_id] = {index, per_task_, problem, sample};
        tasks.push_back(std::move(t));
      }
      if (answer_of_) p.answer = answer_of_(p.problem_id);
      round.result.problems.push_back(std::move(p));
      round.expected += plan.samples;
    }
  }
  rounds_.push_back(std::move(round));
  std::reverse(tasks.begin(), tasks.end());  // pushed at the front one by one: the first problem goes out first
  return tasks;
}

bool EvalScheduler::take(const Trajectory& t) {
  const auto it = tasks_.find(t.task_id);
  if (it == tasks_.end()) return false;
  EvalRound& round = rounds_[it->second.round];
  EvalProblemResult& problem = round.result.problems[it->second.problem];
  const std::uint32_t sample = it->second.sample;
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  if (!t.role.empty() && !t.rewards.empty()) round.role_reward[t.role] += finite(t.rewards[0]);
  if (response_text_ && (t.role.empty() || t.role == lead_role_)) problem.responses[sample] = response_text_(t);
  ++received_;
  round.result.version_low = std::min(round.result.version_low, t.weight_version_min);
  round.result.version_high = std::max(round.result.version_high, t.weight_version_max);
  if (--it->second.remaining > 0) return true;  // the team's other roles are still to come
  tasks_.erase(it);
  ++round.received;
  // A team trajectory carries {role reward, team reward}; a single-agent one {reward}.
  const double reward = t.rewards.empty() ? 0.0 : finite(t.rewards.back());
  problem.rewards[sample] = reward;
  round.reward_sum += reward;
  if (round.done()) finish(round);
  return true;
}

void EvalScheduler::finish(EvalRound& round) {
  round.result.t_end = ctx_.now();
  round.result.score();
  spans_.emplace_back(round.result.t_start, round.result.t_end);
  const std::int64_t version = round.result.version_high;
  // count: the summed rewards of all sets' answers, of `total` answers (the per-set scores are in eval.h5).
  ctx_.event(TraceKind::Eval, round.result.t_start, version, 0,
             static_cast<std::uint64_t>(std::llround(round.reward_sum)),
             {.total = static_cast<std::uint64_t>(round.expected)});
  std::size_t solved = 0, problems = 0;
  for (const auto& p : round.result.problems) solved += p.solved() ? 1 : 0;
  problems = round.result.problems.size();
  const bool sampled = std::any_of(plans_.begin(), plans_.end(), [](const EvalSetPlan& p) { return p.samples > 1; });
  // count: the problems with a sample of full reward, of `total` problems.
  if (sampled) ctx_.event(TraceKind::EvalPassAtK, round.result.t_start, version, 0, solved, {.total = problems});
  std::string roles;  // each role's own mean reward, for a team
  for (const auto& [role, sum] : round.role_reward)
    roles += fmt::format("{}{} {:.3f}", roles.empty() ? "; " : ", ", role, sum / static_cast<double>(round.expected));
  const std::string versions = fmt::format("v{}{}", round.result.version_low,
                                           round.result.version_low == version ? "" : fmt::format("..v{}", version));
  std::string sets;
  for (const auto& s : round.result.sets) {
    sets += fmt::format("{}{} {:.3f}", sets.empty() ? "" : ", ", s.name, s.accuracy);
    if (s.samples > 1) sets += fmt::format(" (pass@{} {:.3f})", s.samples, s.pass_at_k);
  }
  spdlog::info("eval: {} {} {:.3f} over {} set{} [{}] on {} problems (weights {}{})",
               eval_.temperature == 0.0 ? "greedy" : fmt::format("temperature {}", eval_.temperature),
               roles.empty() ? "mean accuracy" : "team mean accuracy", round.accuracy(), round.result.sets.size(),
               round.result.sets.size() == 1 ? "" : "s", sets, problems, versions, roles);
  if (round_done_) round_done_(round);
  // The answers are in eval.h5 now; a round keeps only its scores. (At the paper's scale a round
  // holds 200 problems × 4 samples of up to 32k tokens: ~80 MB of text, every eval.every versions.)
  round.result.problems.clear();
  round.result.problems.shrink_to_fit();
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
