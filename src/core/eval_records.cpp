// An evaluation round's scores: per set (pass@1 as avg@k, pass@k) and the mean over sets.
#include "astraflow/core/eval_records.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace astraflow {

double EvalProblemResult::meanReward() const {
  if (rewards.empty()) return 0.0;
  double sum = 0;
  for (const double r : rewards) sum += std::isfinite(r) ? r : 0.0;
  return sum / static_cast<double>(rewards.size());
}

bool EvalProblemResult::solved() const {
  return std::any_of(rewards.begin(), rewards.end(), [](double r) { return r >= 1.0; });
}

void EvalRoundResult::score() {
  std::vector<double> reward_sum(sets.size(), 0.0), solved(sets.size(), 0.0), count(sets.size(), 0.0);
  for (const auto& p : problems) {
    reward_sum[p.set] += p.meanReward();
    solved[p.set] += p.solved() ? 1.0 : 0.0;
    count[p.set] += 1.0;
  }
  for (std::size_t s = 0; s < sets.size(); ++s) {
    sets[s].problems = static_cast<std::uint64_t>(count[s]);
    sets[s].accuracy = count[s] > 0 ? reward_sum[s] / count[s] : 0.0;
    sets[s].pass_at_k = count[s] > 0 ? solved[s] / count[s] : 0.0;
  }
}

double EvalRoundResult::meanAccuracy() const {
  if (sets.empty()) return -1.0;
  double sum = 0;
  for (const auto& s : sets) sum += s.accuracy;
  return sum / static_cast<double>(sets.size());
}

double EvalRoundResult::meanPassAtK() const {
  if (sets.empty()) return -1.0;
  double sum = 0;
  for (const auto& s : sets) sum += s.pass_at_k;
  return sum / static_cast<double>(sets.size());
}

}  // namespace astraflow
