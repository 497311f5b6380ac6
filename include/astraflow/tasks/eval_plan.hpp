#pragma once
// Which problems an evaluation round takes (docs/tasks.md "Evaluation"): the environment's own
// held-out set and the named eval.sets, each with its problem count and samples per problem.
// Shared by `astraflow run`'s rounds (src/dataflow) and `astraflow eval` (src/run).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/tasks/environment.hpp"

namespace astraflow {

// One set as a round takes it: the environment's set index (Environment::heldOutSets), how many
// of its first problems, how many samples each.
struct EvalSetPlan {
  std::string name;
  std::size_t set = 0;
  std::uint64_t problems = 0;
  std::uint32_t samples = 1;
};

// `held_out` (set 0) with eval.problems when the environment has such problems (a dataset's rows
// evaluated once each at most), then every eval.sets entry (its problems, or every row; its
// samples, or eval.samples). A set with no problems is left out; no evaluation: none.
std::vector<EvalSetPlan> planEvalSets(const EvalSection& eval, const Environment& env);

}  // namespace astraflow
