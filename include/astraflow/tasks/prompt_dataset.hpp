#pragma once
// Prompt datasets (docs/tasks.md): JSONL files of one object per line, Parquet files, Arrow files
// and Hugging Face `datasets` folders (one object per row) — `prompt` as text or `messages` as a
// conversation, an `answer` and any metadata; verl's layout (`prompt` a conversation,
// `reward_model.ground_truth`) and other column names (DatasetOptions::columns) read as such —
// into typed rows, with the rows that cannot be used skipped, counted and reported by file and
// line (row); prompts rewritten and held to a token limit; duplicates dropped by a hash of their
// content; a held-out eval split chosen by that hash; and a shuffled order per epoch that depends
// only on the seed and the epoch (so a resumed run continues it).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "astraflow/core/environment_options.hpp"

namespace astraflow {

struct PromptRow {
  std::uint64_t hash = 0;     // of the prompt (or messages) and the answer: dedup and the split
  std::string prompt;         // the text, or empty when the row has messages
  std::string messages_json;  // the conversation as JSON (a list of {role, content}), or empty
  std::string answer;         // the reference (`answer`; a number is written as its JSON text)
  std::string metadata_json;  // every other field of the row, as a JSON object
  std::string file;           // where it came from
  std::size_t line = 0;
};

struct DatasetOptions {
  std::size_t max_prompt_bytes = 64 * 1024;  // longer prompts are skipped (and counted)
  double eval_fraction = 0.0;                // rows held out for evaluation, by content hash
  std::uint64_t seed = 1;                    // the split and the per-epoch shuffles
  // Which column holds each of a row's parts: keys "prompt", "messages", "answer", "tests"; values the
  // row's column names (a dotted path reaches into a struct: "reward_model.ground_truth").
  std::map<std::string, std::string> columns;
  PromptRewrite rewrite;
  // Rows whose prompt, as the policy sees it, is longer than `max_prompt_tokens` are skipped (and
  // counted); `prompt_tokens` counts a row's tokens (0 or no counter: no limit).
  std::size_t max_prompt_tokens = 0;
  std::function<std::size_t(const PromptRow&)> prompt_tokens;
};

struct DatasetIssue {
  std::string file;
  std::size_t line = 0;
  std::string what;
};

struct DatasetReport {
  std::size_t lines = 0;                   // non-empty lines read
  std::size_t rows = 0;                    // kept (train + eval)
  std::size_t duplicates = 0;              // dropped as already seen
  std::size_t bad = 0;                     // skipped: not JSON, not an object, no prompt, too long, ...
  std::vector<DatasetIssue> first_issues;  // the first 20 bad lines, with file and line
};

class PromptDataset {
 public:
  // Reads every file in order. Throws Error naming the files when none can be read or no line
  // is usable (an empty file, every line bad); bad lines otherwise are only counted.
  static PromptDataset load(const std::vector<std::filesystem::path>& files, const DatasetOptions& options);

  const std::vector<PromptRow>& train() const { return train_; }
  const std::vector<PromptRow>& eval() const { return eval_; }
  const DatasetReport& report() const { return report_; }

  // Epoch `epoch`'s order of the train rows: a permutation from (seed, epoch) alone.
  std::vector<std::size_t> epochOrder(std::uint64_t epoch) const;

 private:
  std::vector<PromptRow> train_, eval_;
  DatasetReport report_;
  std::uint64_t seed_ = 1;
};

}  // namespace astraflow
