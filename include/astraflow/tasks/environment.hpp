#pragma once
// Environments with verifiable rewards (docs/architecture.md §6), behind one interface and a
// registry by name. Pure C++: no tensors, no MPI.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/core/environment_options.hpp"

namespace astraflow {

struct StepResult {
  std::string observation;  // text the environment appends to the context (may be empty)
  double reward = 0.0;      // final reward on the done step, 0 before
  bool done = false;
};

class Environment {
 public:
  virtual ~Environment() = default;
  virtual std::string name() const = 0;

  // Starts the episode of problem `problem_id` (deterministic: same id, same problem) and
  // returns the first observation: the prompt the policy continues.
  virtual std::string reset(std::uint64_t problem_id) = 0;
  // Feeds one agent turn (its generated text, stop tag included); returns what the
  // environment says back, the reward and whether the episode ended. After max turns the
  // episode ends with reward 0.
  virtual StepResult step(std::string_view action) = 0;

  // The agent turns a perfect agent would take in the current episode (for warm-start SFT),
  // empty before the first reset():
  //   arithmetic  prompt "12+34=<answer>"  → {"46</answer>"}
  //   search      prompt "value of xqz?"   → {"<search>xqz</search>", "<answer>417</answer>"}
  virtual std::vector<std::string> referenceActions() const = 0;
  // Text that ends an agent turn (the engine stops generating after it), e.g. "</answer>".
  virtual std::vector<std::string> stopStrings() const = 0;
  virtual int maxTurns() const = 0;

  // Problems are split by id-derived content into training and held-out sets: evaluation uses
  // held-out ids only, training never sees them. heldOutId(k) is the k-th held-out problem id,
  // trainingId(k) the k-th training id; the two sequences never share a problem.
  virtual std::uint64_t trainingId(std::uint64_t k) const = 0;
  virtual std::uint64_t heldOutId(std::uint64_t k) const = 0;

  // Metadata of the current problem (e.g. {"difficulty": "2"}) for curricula and traces.
  virtual std::map<std::string, std::string> metadata() const = 0;
};

// Registry by name: "arithmetic", "search". Unknown name → std::invalid_argument listing the
// registered names.
std::unique_ptr<Environment> makeEnvironment(const EnvironmentOptions& options);
std::vector<std::string> environmentNames();

// Lets parseConfig check environment.name against this registry (core/config_checks.hpp).
void registerTaskConfigChecks();

}  // namespace astraflow
