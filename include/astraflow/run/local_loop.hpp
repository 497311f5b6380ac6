#pragma once
// Single-process loops: `astraflow sft` (warm start on reference solutions) and
// `astraflow train-local` (generate groups → reward → loss → step, with periodic greedy
// evaluation). The correctness reference for the distributed runtime, not the product.
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

// Declared, not included: the CLI includes this header, and LibTorch's headers cost ~20 s of
// compile per file on a 2-core machine (rollout/generation.hpp defines it).
class GenerationEngine;

struct LocalRunResult {
  double eval_accuracy_start = 0;
  double eval_accuracy_end = 0;
  int steps = 0;
  double wall_seconds = 0;
  std::int64_t dropped = 0;  // samples dropped for NaN/inf
  std::string checkpoint;    // written (sft) or loaded (train-local), may be empty

  std::string json() const;  // the one JSON line both commands print on stdout
};

// Mean reward of greedy episodes on the first `problems` held-out problems.
double evaluateGreedy(GenerationEngine& engine, const Tokenizer& tokenizer, const Config& config, int problems);

// With a multi-agent workflow, runSft trains every role's policy on its reference examples
// (runWorkflowSft) and writes them all to sft.checkpoint; the result's accuracies are the first
// role's. train-local runs single-agent episodes only.
LocalRunResult runSft(const Config& config);
LocalRunResult runWorkflowSft(const Config& config);
// Share of held-out examples of a workflow role whose greedy output makes the reference's
// decision (sameDecision: the verdict, the pick, the solver's exact answer).
double evaluateRoleGreedy(GenerationEngine& engine, const Tokenizer& tokenizer, const Config& config, std::size_t role,
                          int problems);
LocalRunResult runTrainLocal(const Config& config);

}  // namespace astraflow
