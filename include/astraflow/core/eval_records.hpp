#pragma once
// One evaluation round's results (docs/tasks.md "Evaluation"): each set's scores, their mean, and
// every problem's samples. Made by the dataflow rank (`astraflow run`) and by `astraflow eval`,
// written to <run>/eval.h5 (io/eval_table.hpp) and summarised in summary.json.
#include <cstdint>
#include <string>
#include <vector>

namespace astraflow {

struct EvalProblemResult {
  std::uint32_t set = 0;               // index into EvalRoundResult::sets
  std::uint64_t index = 0;             // the problem's place in its set
  std::uint64_t problem_id = 0;        // the environment's id (tasks' problem_id)
  std::string answer;                  // the reference answer; empty where the environment has none as text
  std::vector<double> rewards;         // one per sample, in sample order (a team's: the team reward)
  std::vector<std::string> responses;  // the policy's text per sample (a team's: the first role's)

  double meanReward() const;
  bool solved() const;  // some sample has full reward (≥ 1)
};

struct EvalSetResult {
  std::string name;
  std::uint64_t problems = 0;
  std::uint32_t samples = 1;  // k
  double accuracy = 0;        // pass@1 as avg@k: the mean reward over problems × samples
  double pass_at_k = 0;       // the fraction of problems with a sample of full reward
};

struct EvalRoundResult {
  std::int64_t version_low = 0, version_high = 0;  // the weight versions that answered (equal in a run)
  double t_start = 0, t_end = 0;                   // seconds on the run clock
  std::vector<EvalSetResult> sets;
  std::vector<EvalProblemResult> problems;  // set by set, each set's in index order

  // The mean over sets (each set counts once, whatever its size); -1 without sets.
  double meanAccuracy() const;
  double meanPassAtK() const;
  // Fills each set's accuracy and pass@k from `problems`.
  void score();
};

}  // namespace astraflow
