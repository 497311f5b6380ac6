#pragma once
// What the environments over JSONL prompt datasets share (docs/tasks.md): `dataset` (one turn)
// and the tool environments `code_interpreter` and `doc_search` (several turns). The rows and
// the compiled chat template are read once per process; problem ids index the rows, so a task
// stays a few bytes and every rank opens the same files. Private to src/tasks.
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "astraflow/text/chat_template.hpp"

namespace astraflow::detail {

struct DatasetTask {
  struct NamedRows {
    std::string name;
    std::vector<PromptRow> rows;
  };
  PromptDataset train;
  std::vector<PromptRow> eval;  // the held_out set: environment.eval, or eval_fraction of train
  std::vector<NamedRows> sets;  // eval.sets, in config order (evaluation sets 1, 2, …)
  ChatTemplate chat;
};

// A row's conversation, after the configured system prompt where the row has none.
nlohmann::ordered_json rowMessages(const PromptRow& row, const DatasetTaskOptions& options);
// The chat template's options: the generation prompt, and enable_thinking where it is set.
ChatOptions datasetChatOptions(const DatasetTaskOptions& options, bool add_generation_prompt);

// The task of these options, loaded on first use and shared by every environment of the process.
std::shared_ptr<const DatasetTask> sharedDatasetTask(const DatasetTaskOptions& options);

// Rows, ids, rendering, scoring and metadata; subclasses say what a turn does.
class DatasetEnvironmentBase : public Environment {
 public:
  explicit DatasetEnvironmentBase(const EnvironmentOptions& options);

  bool rendersWholeSequence() const override { return true; }
  // The turn ends with the tokenizer's end-of-sequence token (the template's end of turn).
  std::vector<std::string> stopStrings() const override { return {}; }
  // The row's worked solution, else the bare answer in the form the reward reads.
  std::vector<std::string> referenceActions() const override;
  // Epoch e = k / rows visits every training row once, in the dataset's order for (seed, e).
  std::uint64_t trainingId(std::uint64_t k) const override;
  std::uint64_t heldOutId(std::uint64_t k) const override;
  std::vector<HeldOutSet> heldOutSets() const override;
  std::uint64_t heldOutSetId(std::size_t set, std::uint64_t k) const override;
  std::string referenceAnswer(std::uint64_t problem_id) const override;
  // The row's own fields beside prompt/messages/answer: text as it is, anything else as JSON.
  std::map<std::string, std::string> metadata() const override;
  std::optional<std::string> problemText() const override;

 protected:
  using json = nlohmann::ordered_json;
  // The row's conversation, after the configured system prompt where the row has none.
  json startMessages(std::uint64_t problem_id);
  ChatOptions chatOptions(bool add_generation_prompt) const;
  // The configured reward of `response` against the current row (code reads its "tests").
  RewardResult score(std::string_view response) const;
  const PromptRow& row() const;
  // The row a problem id names (training, held-out or a named set's); Error for one past the rows.
  const PromptRow& rowOf(std::uint64_t problem_id) const;

  EnvironmentOptions options_;
  std::shared_ptr<const DatasetTask> task_;
  RewardFunction reward_;
  const PromptRow* row_ = nullptr;
  std::string prompt_;  // the row rendered, as the policy saw it

 private:
  mutable std::vector<std::size_t> order_;
  mutable std::uint64_t order_epoch_ = 0;
};

}  // namespace astraflow::detail
