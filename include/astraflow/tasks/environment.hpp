#pragma once
// Environments with verifiable rewards (docs/architecture.md §6), behind one interface and a
// registry by name. Pure C++: no tensors, no MPI.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/core/environment_options.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

struct McpTool;  // tasks/mcp_client.hpp

struct StepResult {
  std::string observation;  // text the environment appends to the context (may be empty)
  double reward = 0.0;      // final reward on the done step, 0 before
  std::string reason;       // why the done step got its reward ("correct", "no_answer", …); may be empty
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
  // True when reset() returns the whole start of the sequence, special tokens included (a
  // rendered chat template puts in its own <bos> where the model has one): the episode adds no
  // <bos> and encodes the prompt as it is.
  virtual bool rendersWholeSequence() const { return false; }
  // Tokens an episode may hold, prompt and tool replies included; past it the episode ends
  // truncated. 0: the model's max_seq_len (the tighter of the two always applies).
  virtual int maxContextTokens() const { return 0; }
  // The current problem as plain text, for the workflows that put it in their own messages (the
  // code workflows, docs/multi-policy.md): a dataset row's prompt, or its conversation's last user
  // message. nullopt where the problem is only the prompt reset() returns (the synthetic ones).
  virtual std::optional<std::string> problemText() const { return std::nullopt; }
  // The tools the environment itself serves (an MCP-style OpenEnv server's, listed at its first
  // reset) and shows the policy beside environment.tools.mcp's; none by default.
  virtual std::vector<McpTool> servedTools() const;

  // Problems are split by id-derived content into training and held-out sets: evaluation uses
  // held-out ids only, training never sees them. heldOutId(k) is the k-th held-out problem id,
  // trainingId(k) the k-th training id; the two sequences never share a problem.
  virtual std::uint64_t trainingId(std::uint64_t k) const = 0;
  virtual std::uint64_t heldOutId(std::uint64_t k) const = 0;
  // Evaluation sets (docs/tasks.md "Evaluation"): set 0 is heldOutId's, named `held_out`; the
  // dataset environments add eval.sets after it, in config order. `rows`: the problems a set
  // holds (kUnbounded for generated problems; 0 for a dataset without held-out rows).
  struct HeldOutSet {
    static constexpr std::uint64_t kUnbounded = ~std::uint64_t{0};
    std::string name;
    std::uint64_t rows = kUnbounded;
  };
  virtual std::vector<HeldOutSet> heldOutSets() const { return {{"held_out", HeldOutSet::kUnbounded}}; }
  // The k-th problem of set `set` (k < rows); set 0's is heldOutId(k). Error for a set not listed.
  virtual std::uint64_t heldOutSetId(std::size_t set, std::uint64_t k) const;
  // The reference answer of a problem as evaluation tables record it (a dataset row's answer);
  // empty where the environment has none as text.
  virtual std::string referenceAnswer(std::uint64_t problem_id) const {
    (void)problem_id;
    return {};
  }
  // The k-th training problem that has referenceActions() (the warm start's problems): every
  // training problem by default; an OpenEnv environment's demonstrated seeds.
  virtual std::uint64_t referenceId(std::uint64_t k) const { return trainingId(k); }

  // Metadata of the current problem (e.g. {"difficulty": "2"}) for curricula and traces.
  virtual std::map<std::string, std::string> metadata() const = 0;
  // Metadata of problem `problem_id` without playing it, for the dataflow rank's curators: by
  // default a reset (deterministic and cheap for the in-process environments); an environment
  // whose reset opens a session on a server says what it knows without one.
  virtual std::map<std::string, std::string> metadataOf(std::uint64_t problem_id) {
    reset(problem_id);
    return metadata();
  }
};

// Registry by name: "arithmetic", "search", "dataset", "code_interpreter", "doc_search", "openenv". Unknown name →
// std::invalid_argument listing the registered names.
std::unique_ptr<Environment> makeEnvironment(const EnvironmentOptions& options);
std::vector<std::string> environmentNames();

// The tokenizer episodes of this environment are encoded with: the task vocabulary for the
// synthetic environments, the policy folder's tokenizer.json for the dataset environments
// (Error when the policies' folders hold different ones).
std::unique_ptr<Tokenizer> makeEnvironmentTokenizer(const EnvironmentOptions& options);

// Lets parseConfig check environment.name against this registry (core/config_checks.hpp).
void registerTaskConfigChecks();

}  // namespace astraflow
