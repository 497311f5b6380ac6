// PromptDataset::load: JSONL, Parquet and Arrow prompt files read into PromptRows (columns mapped, verl's layout
// read, prompts rewritten and held to a token limit, bad rows skipped and reported by file and line, duplicates
// dropped by content hash, an eval split by that hash); epochOrder, the seeded per-epoch shuffle.
#include "astraflow/tasks/prompt_dataset.hpp"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "astraflow/core/error.hpp"
#include "tasks/deterministic_hash.hpp"
#include "tasks/jsonl_reader.hpp"
#include "tasks/table_reader.hpp"

namespace astraflow {
namespace {

using json = nlohmann::ordered_json;
constexpr std::uint64_t kSplitScale = 1'000'000;

// The value at a dotted path ("reward_model.ground_truth"), or in a column of that very name (as
// pandas' json_normalize flattens it); null when there is none.
const json* at(const json& j, const std::string& path) {
  if (j.is_object() && j.contains(path)) return &j[path];
  const json* node = &j;
  for (std::size_t start = 0;;) {
    const std::size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

// The row in the canonical layout: the configured columns renamed to prompt / messages / answer;
// verl's layout (`prompt` a conversation, the answer in `reward_model.ground_truth`) and the common
// `problem` / `question` columns read without a mapping. The columns taken leave the metadata.
std::string canonical(const json& j, const DatasetOptions& options, json& out) {
  if (!j.is_object()) return "not a JSON object";
  out = j;
  // Every mapped value is taken before any column is renamed: {prompt: answer, answer: prompt}
  // swaps them.
  std::vector<std::pair<std::string, json>> mapped;
  for (const auto& [part, column] : options.columns) {
    const json* value = at(j, column);
    if (!value) return fmt::format("has no column \"{}\" (environment.columns.{})", column, part);
    mapped.emplace_back(part, *value);
  }
  for (const auto& [part, column] : options.columns)
    if (column != part && out.contains(column)) out.erase(column);
  for (auto& [part, value] : mapped) out[part] = std::move(value);
  // A row with both a prompt and a conversation (ultrachat, no_robots): the mapped one, else the
  // conversation.
  if (out.contains("prompt") && out.contains("messages"))
    out.erase(options.columns.count("prompt") && !options.columns.count("messages") ? "messages" : "prompt");
  if (out.contains("prompt") && out["prompt"].is_array() && !out.contains("messages")) {
    out["messages"] = out["prompt"];  // verl: the prompt is a conversation
    out.erase("prompt");
  }
  if (!out.contains("prompt") && !out.contains("messages")) {
    for (const char* alias : {"problem", "question"})
      if (out.contains(alias) && out[alias].is_string()) {
        out["prompt"] = out[alias];
        out.erase(alias);
        break;
      }
  }
  if (!out.contains("answer")) {
    if (const json* truth = at(out, "reward_model.ground_truth")) out["answer"] = *truth;
  }
  return "";
}

// A floating-point answer as a reader writes it: the shortest text that reads back as the value,
// in positional notation (0.00001, not 1e-05, which the math reward would read as e - 5).
std::string decimalText(double v) {
  std::string s = fmt::format("{}", v);
  const auto e = s.find_first_of("eE");
  if (e == std::string::npos) return s;
  const int exponent = std::stoi(s.substr(e + 1));
  std::string mantissa = s.substr(0, e);
  const bool negative = !mantissa.empty() && mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits = mantissa;
  const auto dot = digits.find('.');
  int point = static_cast<int>(dot == std::string::npos ? digits.size() : dot) + exponent;
  if (dot != std::string::npos) digits.erase(dot, 1);
  std::string out;
  if (point <= 0) {
    out = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= static_cast<int>(digits.size())) {
    out = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    out = digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
  }
  return (negative ? "-" : "") + out;
}

// The row's prompt text as the rewrite rules leave it.
std::string rewritten(std::string text, const PromptRewrite& rewrite) {
  auto trimmed = [](std::string& s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  };
  for (const auto& suffix : rewrite.strip_suffixes) {
    std::string t = text;
    trimmed(t);
    if (t.size() >= suffix.size() && t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0) {
      t.resize(t.size() - suffix.size());
      trimmed(t);
      text = t;
      break;
    }
  }
  return text + rewrite.append;
}

// The last user message's text content, rewritten in place.
void rewriteMessages(json& messages, const PromptRewrite& rewrite) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it)
    if ((*it)["role"] == "user" && (*it)["content"].is_string()) {
      (*it)["content"] = rewritten((*it)["content"].get<std::string>(), rewrite);
      return;
    }
}

// A row from one parsed line, or the reason it cannot be one.
std::string rowFrom(const json& source, const DatasetOptions& options, PromptRow& row) {
  json j;
  if (std::string problem = canonical(source, options, j); !problem.empty()) return problem;
  const bool has_prompt = j.contains("prompt");
  const bool has_messages = j.contains("messages");
  if (has_prompt == has_messages) return "needs exactly one of \"prompt\" (text) and \"messages\" (a conversation)";
  if (has_prompt) {
    if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
      return "\"prompt\" is not a non-empty string";
    row.prompt = options.rewrite.empty() ? j["prompt"].get<std::string>()
                                         : rewritten(j["prompt"].get<std::string>(), options.rewrite);
  } else {
    json m = j["messages"];
    if (!m.is_array() || m.empty()) return "\"messages\" is not a non-empty list";
    for (const json& turn : m) {
      if (!turn.is_object() || !turn.contains("role") || !turn["role"].is_string() || !turn.contains("content"))
        return "a message has no \"role\" string or no \"content\"";
    }
    if (!options.rewrite.empty()) rewriteMessages(m, options.rewrite);
    row.messages_json = m.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  const std::size_t size = row.prompt.size() + row.messages_json.size();
  if (size > options.max_prompt_bytes)
    return fmt::format("the prompt has {} bytes, past the limit of {}", size, options.max_prompt_bytes);
  if (j.contains("answer") && !j["answer"].is_null()) {
    const json& a = j["answer"];
    if (a.is_string())
      row.answer = a.get<std::string>();
    else if (a.is_number_float())
      row.answer = decimalText(a.get<double>());
    else if (a.is_number() || a.is_boolean())
      row.answer = a.dump();
    else
      return "\"answer\" is neither text nor a number";
  }
  json metadata = json::object();
  for (const auto& [key, value] : j.items())
    if (key != "prompt" && key != "messages" && key != "answer") metadata[key] = value;
  row.metadata_json = metadata.dump(-1, ' ', false, json::error_handler_t::replace);
  row.hash = detail::hashString(detail::hashString(0x5EED, row.prompt + row.messages_json), row.answer);
  if (options.max_prompt_tokens > 0 && options.prompt_tokens) {
    const std::size_t tokens = options.prompt_tokens(row);
    if (tokens > options.max_prompt_tokens)
      return fmt::format("the prompt has {} tokens, past the limit of {}", tokens, options.max_prompt_tokens);
  }
  return "";
}

// The first reported issue of `file`, as "FILE:LINE: what".
std::string firstIssueOf(const DatasetReport& report, const std::string& file) {
  for (const auto& issue : report.first_issues)
    if (issue.file == file) return fmt::format("{}:{}: {}", issue.file, issue.line, issue.what);
  return "none recorded";
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
    const std::size_t rows_before = d.train_.size() + d.eval_.size(), dups_before = d.report_.duplicates;
    const std::size_t lines_before = d.report_.lines;
    const auto take = [&](const json& j, std::size_t number) {
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
    };
    if (detail::isTableFile(file))
      detail::readTableRows(file, "dataset", d.report_, take);
    else
      detail::readJsonLines(file, "dataset", d.report_, take);
    // A file with rows none of which could be used is a mistake (a wrong layout or column name),
    // not something to train without.
    if (d.report_.lines > lines_before && d.train_.size() + d.eval_.size() == rows_before &&
        d.report_.duplicates == dups_before)
      throw Error(fmt::format("dataset {}: no usable rows ({} rows, all skipped; e.g. {})", file.string(),
                              d.report_.lines - lines_before, firstIssueOf(d.report_, file.string())));
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
