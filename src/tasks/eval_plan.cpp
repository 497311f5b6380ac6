// planEvalSets: the sets an evaluation round takes, from eval.* and the environment's sets.
#include "astraflow/tasks/eval_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "astraflow/core/error.hpp"

namespace astraflow {

std::vector<EvalSetPlan> planEvalSets(const EvalSection& eval, const Environment& env) {
  std::vector<EvalSetPlan> plans;
  if (!eval.enabled()) return plans;
  const auto env_sets = env.heldOutSets();
  const auto samples = static_cast<std::uint32_t>(eval.samples);
  if (eval.problems > 0 && !env_sets.empty()) {
    const std::uint64_t problems = std::min<std::uint64_t>(static_cast<std::uint64_t>(eval.problems), env_sets[0].rows);
    if (problems > 0) plans.push_back({env_sets[0].name, 0, problems, samples});
  }
  for (std::size_t i = 0; i < eval.sets.size(); ++i) {
    const EvalSetSpec& spec = eval.sets[i];
    const std::size_t set = i + 1;
    if (set >= env_sets.size() || env_sets[set].name != spec.name)
      throw Error(fmt::format("eval.sets: environment {} has no set '{}' (a dataset environment loads them)",
                              env.name(), spec.name));
    const std::uint64_t rows = env_sets[set].rows;
    const std::uint64_t problems = spec.problems == 0 ? rows : std::min(spec.problems, rows);
    if (problems == 0) continue;
    plans.push_back({spec.name, set, problems, spec.samples > 0 ? static_cast<std::uint32_t>(spec.samples) : samples});
  }
  return plans;
}

}  // namespace astraflow
