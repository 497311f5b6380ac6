#pragma once
// EvalScheduler — the dataflow rank's evaluation rounds: which tasks a round is made of, which
// returning trajectories belong to one, and the rounds' results. A round evaluates every planned
// set (docs/tasks.md "Evaluation"): its problems × its samples episodes, greedy or at
// eval.temperature; a multi-agent team's round waits for one trajectory per role of each task.
// Each set is scored on its own — accuracy (pass@1 as avg@k) and pass@k, the fraction of problems
// with a sample of full reward (paper A.1: k = 4 at temperature 0.6) — and the round by the mean
// over sets. Private to src/dataflow.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/comm/role_context.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/eval_records.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/tasks/eval_plan.hpp"

namespace astraflow::dataflow_detail {

// One evaluation round.
struct EvalRound {
  std::int64_t min_version = 0;
  std::size_t expected = 0;  // tasks: Σ problems × samples
  std::size_t received = 0;
  double reward_sum = 0;  // every sample's reward, all sets together (the trace's Eval event)
  EvalRoundResult result;
  std::map<std::string, double> role_reward;  // sum of each role's own reward (multi-agent workflows)
  bool done() const { return received == expected; }
  double accuracy() const { return result.meanAccuracy(); }  // scored once done
  double passAtK() const { return result.meanPassAtK(); }
};

class EvalScheduler {
 public:
  // trajectories_per_task: 1, or the number of workflow roles of a team; lead_role: the role
  // whose text the round records (empty for single-agent runs).
  EvalScheduler(const RoleContext& ctx, const EvalSection& eval, std::size_t trajectories_per_task,
                std::vector<EvalSetPlan> plans, std::string lead_role)
      : ctx_(ctx),
        eval_(eval),
        per_task_(trajectories_per_task),
        plans_(std::move(plans)),
        lead_role_(std::move(lead_role)) {}

  // What a round records of each answer (the decoded response) and of each problem (its
  // reference answer); both optional.
  void setResponseText(std::function<std::string(const Trajectory&)> f) { response_text_ = std::move(f); }
  void setAnswerOf(std::function<std::string(std::uint64_t problem_id)> f) { answer_of_ = std::move(f); }
  // Called with each round as it completes (the evaluation table, keep_best); after it the round
  // keeps its scores, not its problems' answers.
  void setRoundDone(std::function<void(const EvalRound&)> f) { round_done_ = std::move(f); }

  bool enabled() const { return !plans_.empty(); }
  const std::vector<EvalSetPlan>& plans() const { return plans_; }

  // A new round at weights >= min_version: `make_task(set, k)` builds the task of the k-th problem
  // of environment set `set`; the tasks come back in the order they should be queued (ahead of
  // training tasks: push each at the front).
  std::vector<Task> start(std::int64_t min_version,
                          const std::function<Task(std::size_t set, std::uint64_t k)>& make_task);
  // Takes the trajectory when it answers an evaluation task (true), logging and tracing a round
  // as it completes; false for every other trajectory.
  bool take(const Trajectory& t);

  bool owns(std::uint64_t task_id) const { return tasks_.count(task_id) != 0; }
  bool pending() const { return !tasks_.empty(); }

  // A resumed run carries its first round's accuracy over from the checkpoint.
  void restoreStart(double accuracy) {
    start_accuracy_ = accuracy;
    resumed_ = true;
  }
  double startAccuracy() const;  // -1 when unknown
  double endAccuracy() const;    // the last round's mean over sets, -1 unless it finished
  double endPassAtK() const;     // the last round's mean pass@k, -1 unless it finished
  // The role's mean eval reward in the first ("start") or last round; -1 when unknown.
  double roleReward(const std::string& role, bool last) const;
  const EvalRound* latestDone() const;
  // The version of the oldest round still running (its checkpoint may yet be the best), or the
  // largest int64 when none is.
  std::int64_t oldestUnfinished() const {
    std::int64_t v = std::numeric_limits<std::int64_t>::max();
    for (const auto& r : rounds_)
      if (!r.done()) v = std::min(v, r.min_version);
    return v;
  }
  std::size_t rounds() const { return rounds_.size(); }
  std::uint64_t received() const { return received_; }
  // Finished rounds as (start, end) on the run clock: balance reports leave them out of training.
  const std::vector<std::pair<double, double>>& spans() const { return spans_; }

 private:
  void finish(EvalRound& round);

  const RoleContext& ctx_;
  const EvalSection& eval_;
  std::size_t per_task_;
  std::vector<EvalSetPlan> plans_;
  std::string lead_role_;
  std::function<std::string(const Trajectory&)> response_text_;
  std::function<std::string(std::uint64_t)> answer_of_;
  std::function<void(const EvalRound&)> round_done_;
  std::vector<EvalRound> rounds_;
  struct PendingTask {
    std::size_t round = 0;
    std::size_t remaining = 0;  // trajectories still expected (a team's roles)
    std::size_t problem = 0;    // index into the round's result.problems
    std::uint32_t sample = 0;
  };
  std::map<std::uint64_t, PendingTask> tasks_;  // by evaluation task id
  std::uint64_t received_ = 0;
  double start_accuracy_ = -1;
  bool resumed_ = false;
  std::vector<std::pair<double, double>> spans_;
};

}  // namespace astraflow::dataflow_detail
