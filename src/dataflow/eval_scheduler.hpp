#pragma once
// EvalScheduler — the dataflow rank's held-out evaluations: which tasks a round is made of, which
// returning trajectories belong to one, and the rounds' results. A round is eval.samples episodes
// (greedy, or at eval.temperature) of each of the first eval.problems held-out problems; a
// multi-agent team's round waits for one trajectory per role of each task. It reports the mean
// reward (accuracy; pass@1 as avg@k) and pass@k, the fraction of problems with a sample of full
// reward (paper A.1: k = 4 at temperature 0.6). Private to src/dataflow.
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
#include "astraflow/core/records.hpp"

namespace astraflow::dataflow_detail {

// One evaluation round.
struct EvalRound {
  std::int64_t min_version = 0;
  std::size_t expected = 0;  // tasks: problems × samples
  std::size_t received = 0;
  double correct = 0;                // summed rewards
  std::vector<std::uint8_t> solved;  // per problem: some sample had full reward
  std::int64_t version_low = std::numeric_limits<std::int64_t>::max();
  std::int64_t version_high = -1;
  double t_start = 0;
  std::map<std::string, double> role_reward;  // sum of each role's own reward (multi-agent workflows)
  bool done() const { return received == expected; }
  double accuracy() const { return expected ? correct / static_cast<double>(expected) : 0.0; }
  double passAtK() const;
};

class EvalScheduler {
 public:
  // trajectories_per_task: 1, or the number of workflow roles of a team.
  EvalScheduler(const RoleContext& ctx, const EvalSection& eval, std::size_t trajectories_per_task)
      : ctx_(ctx), problems_(eval.problems), samples_(eval.samples), per_task_(trajectories_per_task) {}

  // A new round at weights >= min_version: `make_task(k)` builds the task of the k-th held-out
  // problem; the tasks come back in the order they should be queued (ahead of training tasks:
  // push each at the front).
  std::vector<Task> start(std::int64_t min_version, const std::function<Task(std::uint64_t k)>& make_task);
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
  double endAccuracy() const;    // the last round's, -1 unless it finished
  double endPassAtK() const;     // the last round's pass@k, -1 unless it finished
  // The role's mean eval reward in the first ("start") or last round; -1 when unknown.
  double roleReward(const std::string& role, bool last) const;
  const EvalRound* latestDone() const;
  std::size_t rounds() const { return rounds_.size(); }
  std::uint64_t received() const { return received_; }
  // Finished rounds as (start, end) on the run clock: balance reports leave them out of training.
  const std::vector<std::pair<double, double>>& spans() const { return spans_; }

 private:
  const RoleContext& ctx_;
  int problems_;
  int samples_;
  std::size_t per_task_;
  std::vector<EvalRound> rounds_;
  struct PendingTask {
    std::size_t round = 0;
    std::size_t remaining = 0;  // trajectories still expected (a team's roles)
    std::size_t problem = 0;
  };
  std::map<std::uint64_t, PendingTask> tasks_;  // by evaluation task id
  std::uint64_t received_ = 0;
  double start_accuracy_ = -1;
  bool resumed_ = false;
  std::vector<std::pair<double, double>> spans_;
};

}  // namespace astraflow::dataflow_detail
