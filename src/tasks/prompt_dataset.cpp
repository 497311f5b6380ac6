// PromptDataset::load: JSONL prompt files read into PromptRows (bad lines skipped and reported by file and line,
// duplicates dropped by content hash, an eval split by that hash); epochOrder, the seeded per-epoch shuffle.
#include "astraflow/tasks/prompt_dataset.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "astraflow/core/error.hpp"
#include "tasks/deterministic_hash.hpp"
#include "tasks/jsonl_reader.hpp"

namespace astraflow {
namespace {

using json = nlohmann::ordered_json;
constexpr std::uint64_t kSplitScale = 1'000'000;

// A row from one parsed line, or the reason it cannot be one.
std::string rowFrom(const json& j, const DatasetOptions& options, PromptRow& row) {
  if (!j.is_object()) return "not a JSON object";
  const bool has_prompt = j.contains("prompt");
  const bool has_messages = j.contains("messages");
  if (has_prompt == has_messages) return "needs exactly one of \"prompt\" (text) and \"messages\" (a conversation)";
  if (has_prompt) {
    if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
      return "\"prompt\" is not a non-empty string";
    row.prompt = j["prompt"].get<std::string>();
  } else {
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) return "\"messages\" is not a non-empty list";
    for (const json& turn : m) {
      if (!turn.is_object() || !turn.contains("role") || !turn["role"].is_string() || !turn.contains("content"))
        return "a message has no \"role\" string or no \"content\"";
    }
    row.messages_json = m.dump();
  }
  const std::size_t size = row.prompt.size() + row.messages_json.size();
  if (size > options.max_prompt_bytes)
    return fmt::format("the prompt has {} bytes, past the limit of {}", size, options.max_prompt_bytes);
  if (j.contains("answer")) {
    const json& a = j["answer"];
    if (a.is_string())
      row.answer = a.get<std::string>();
    else if (a.is_number() || a.is_boolean())
      row.answer = a.dump();
    else
      return "\"answer\" is neither text nor a number";
  }
  json metadata = json::object();
  for (const auto& [key, value] : j.items())
    if (key != "prompt" && key != "messages" && key != "answer") metadata[key] = value;
  row.metadata_json = metadata.dump();
  row.hash = detail::hashString(detail::hashString(0x5EED, row.prompt + row.messages_json), row.answer);
  return "";
}

}  // namespace

PromptDataset PromptDataset::load(const std::vector<std::filesystem::path>& files, const DatasetOptions& options) {
  if (files.empty()) throw Error("dataset: no files given");
  if (options.eval_fraction < 0.0 || options.eval_fraction >= 1.0)
    throw Error(fmt::format("dataset: eval_fraction {} is outside [0, 1)", options.eval_fraction));
  PromptDataset d;
  d.seed_ = options.seed;
  std::unordered_set<std::uint64_t> seen;
  const auto eval_cut = static_cast<std::uint64_t>(options.eval_fraction * static_cast<double>(kSplitScale));
  for (const auto& file : files) {
    detail::readJsonLines(file, "dataset", d.report_, [&](const json& j, std::size_t number) {
      PromptRow row;
      std::string problem = rowFrom(j, options, row);
      if (!problem.empty()) return problem;
      if (!seen.insert(row.hash).second) {
        ++d.report_.duplicates;
        return problem;
      }
      row.file = file.string();
      row.line = number;
      const bool held_out = detail::hashCombine(options.seed, row.hash) % kSplitScale < eval_cut;
      (held_out ? d.eval_ : d.train_).push_back(std::move(row));
      return problem;
    });
  }
  d.report_.rows = d.train_.size() + d.eval_.size();
  if (d.report_.rows == 0) {
    std::string names;
    for (const auto& f : files) names += (names.empty() ? "" : ", ") + f.string();
    const std::string first = d.report_.first_issues.empty()
                                  ? "no non-empty lines"
                                  : fmt::format("e.g. {}:{}: {}", d.report_.first_issues[0].file,
                                                d.report_.first_issues[0].line, d.report_.first_issues[0].what);
    throw Error(
        fmt::format("dataset {}: no usable rows ({} lines, {} bad; {})", names, d.report_.lines, d.report_.bad, first));
  }
  return d;
}

std::vector<std::size_t> PromptDataset::epochOrder(std::uint64_t epoch) const {
  std::vector<std::size_t> order(train_.size());
  std::iota(order.begin(), order.end(), 0);
  // Fisher–Yates with the project's platform-independent stream (<random>'s shuffles are not
  // the same across standard libraries).
  detail::MixStream stream(detail::hashCombine(seed_, epoch));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[stream.below(i)]);
  return order;
}

}  // namespace astraflow
