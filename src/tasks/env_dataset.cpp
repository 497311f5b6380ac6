// DatasetEnvironment ("dataset"): one-turn text tasks from JSONL prompt datasets
// (docs/tasks.md). The prompt is the row's text or conversation rendered with the policy's chat
// template (a generation prompt added), the response is scored by the configured reward against
// the row's answer.
//
// Problem ids index the rows (train: the row's index; evaluation set s: kEvalBit | s << 40 | index,
// set 0 being the held-out rows), so a task
// stays a few bytes and every rank opens the same files: the dataflow rank, which picks the
// order, and the rollout ranks, which render and score.
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "tasks/builtin_environments.hpp"
#include "tasks/dataset_environment.hpp"

namespace astraflow {
namespace {

using json = nlohmann::ordered_json;
constexpr std::uint64_t kEvalBit = std::uint64_t{1} << 62;
constexpr int kSetShift = 40;  // 2^40 rows a set, 2^22 sets
constexpr std::uint64_t kRowMask = (std::uint64_t{1} << kSetShift) - 1;

// Every process reads the files and compiles the template once: a RaaS rank makes an environment
// per episode.
std::string cacheKey(const DatasetTaskOptions& d) {
  json sets = json::array();
  for (const auto& set : d.eval_sets) sets.push_back({set.name, set.files});
  json key = {{"train", d.train_files},
              {"eval", d.eval_files},
              {"sets", sets},
              {"fraction", d.eval_fraction},
              {"max", d.max_prompt_bytes},
              {"seed", d.seed},
              {"columns", d.columns},
              {"strip", d.rewrite.strip_suffixes},
              {"append", d.rewrite.append},
              {"max_tokens", d.max_prompt_tokens},
              {"system", d.system_prompt},
              {"thinking", d.enable_thinking},
              {"folder", d.tokenizer_folders.empty() ? "" : d.tokenizer_folders[0]}};
  return key.dump();
}

// Counts a row's prompt in tokens as the policy gets it: rendered by the chat template with the
// generation prompt, encoded by the folder's tokenizer (environment.max_prompt_tokens).
std::function<std::size_t(const PromptRow&)> promptTokenCounter(const DatasetTaskOptions& d, const ChatTemplate& chat) {
  std::shared_ptr<const HfTokenizer> tokenizer = HfTokenizer::load(d.tokenizer_folders[0]);
  return [d, &chat, tokenizer](const PromptRow& row) {
    return tokenizer->encode(chat.render(detail::rowMessages(row, d), detail::datasetChatOptions(d, true))).size();
  };
}

DatasetOptions loadOptions(const DatasetTaskOptions& d, const ChatTemplate& chat) {
  DatasetOptions o;
  o.max_prompt_bytes = d.max_prompt_bytes;
  o.eval_fraction = d.eval_files.empty() ? d.eval_fraction : 0.0;
  o.seed = d.seed;
  o.columns = d.columns;
  o.rewrite = d.rewrite;
  o.max_prompt_tokens = d.max_prompt_tokens;
  if (d.max_prompt_tokens > 0) o.prompt_tokens = promptTokenCounter(d, chat);
  return o;
}

void logReport(const char* what, const DatasetReport& r) {
  if (r.bad == 0 && r.duplicates == 0) return;
  std::string first;
  for (const auto& issue : r.first_issues) first += fmt::format("\n  {}:{}: {}", issue.file, issue.line, issue.what);
  // Printed by every process that loads it: the report is the same everywhere, and a rank's log
  // is where a user looks.
  fmt::print(stderr, "environment.{}: {} of {} lines skipped, {} duplicates dropped{}\n", what, r.bad, r.lines,
             r.duplicates, first);
}

class DatasetEnvironment final : public detail::DatasetEnvironmentBase {
 public:
  using DatasetEnvironmentBase::DatasetEnvironmentBase;

  std::string name() const override { return "dataset"; }

  std::string reset(std::uint64_t problem_id) override {
    prompt_ = task_->chat.render(startMessages(problem_id), chatOptions(true));
    return prompt_;
  }

  StepResult step(std::string_view action) override {
    const RewardResult r = score(action);
    return {"", r.reward, rewardReasonName(r.reason), true};
  }

  int maxTurns() const override { return 1; }
};

std::string fileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

namespace detail {

json rowMessages(const PromptRow& row, const DatasetTaskOptions& d) {
  json messages = row.prompt.empty() ? json::parse(row.messages_json)
                                     : json::array({json{{"role", "user"}, {"content", row.prompt}}});
  if (!d.system_prompt.empty() && messages.front().value("role", "") != "system")
    messages.insert(messages.begin(), json{{"role", "system"}, {"content", d.system_prompt}});
  return messages;
}

ChatOptions datasetChatOptions(const DatasetTaskOptions& d, bool add_generation_prompt) {
  ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (!d.enable_thinking.empty()) o.extra["enable_thinking"] = d.enable_thinking == "true";
  return o;
}

std::shared_ptr<const DatasetTask> sharedDatasetTask(const DatasetTaskOptions& d) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const DatasetTask>> cache;
  const std::string key = cacheKey(d);
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (d.tokenizer_folders.empty()) throw Error("environment dataset: no policy folder to take the chat template from");
  auto chat = std::make_unique<ChatTemplate>(ChatTemplate::load(d.tokenizer_folders[0]));
  DatasetOptions options = loadOptions(d, *chat);
  std::vector<std::filesystem::path> train_files(d.train_files.begin(), d.train_files.end());
  auto task = std::make_shared<DatasetTask>(DatasetTask{PromptDataset::load(train_files, options), {}, {}, *chat});
  logReport("train", task->train.report());
  if (d.eval_files.empty()) {
    task->eval = task->train.eval();
  } else {
    options.eval_fraction = 0.0;
    std::vector<std::filesystem::path> eval_files(d.eval_files.begin(), d.eval_files.end());
    const PromptDataset eval = PromptDataset::load(eval_files, options);
    logReport("eval", eval.report());
    task->eval = eval.train();
  }
  options.eval_fraction = 0.0;
  for (const auto& set : d.eval_sets) {
    std::vector<std::filesystem::path> files(set.files.begin(), set.files.end());
    const PromptDataset rows = PromptDataset::load(files, options);
    logReport(("eval.sets." + set.name).c_str(), rows.report());
    task->sets.push_back({set.name, rows.train()});
  }
  if (task->train.train().empty())
    throw Error(fmt::format("environment.train: every row of {} is held out; lower environment.eval_fraction",
                            d.train_files.front()));
  cache.emplace(key, task);
  return task;
}

DatasetEnvironmentBase::DatasetEnvironmentBase(const EnvironmentOptions& options)
    : options_(options), task_(sharedDatasetTask(options.dataset)), reward_(options.reward) {}

const PromptRow& DatasetEnvironmentBase::row() const {
  if (row_ == nullptr) throw std::logic_error(name() + " environment: step() before reset()");
  return *row_;
}

const PromptRow& DatasetEnvironmentBase::rowOf(std::uint64_t problem_id) const {
  const bool eval = (problem_id & kEvalBit) != 0;
  const std::uint64_t set = eval ? (problem_id & ~kEvalBit) >> kSetShift : 0;
  const std::uint64_t index = eval ? problem_id & kRowMask : problem_id;
  if (set > task_->sets.size())
    throw Error(fmt::format("{} environment: problem id {} names evaluation set {} of {}", name(), problem_id, set,
                            task_->sets.size() + 1));
  const auto& rows = !eval ? task_->train.train() : set == 0 ? task_->eval : task_->sets[set - 1].rows;
  if (index >= rows.size())
    throw Error(fmt::format("{} environment: problem id {} names {} row {} of {}", name(), problem_id,
                            !eval      ? "training"
                            : set == 0 ? "held-out"
                                       : "eval set " + task_->sets[set - 1].name,
                            index, rows.size()));
  return rows[index];
}

DatasetEnvironmentBase::json DatasetEnvironmentBase::startMessages(std::uint64_t problem_id) {
  row_ = &rowOf(problem_id);
  return rowMessages(*row_, options_.dataset);
}

ChatOptions DatasetEnvironmentBase::chatOptions(bool add_generation_prompt) const {
  return datasetChatOptions(options_.dataset, add_generation_prompt);
}

RewardResult DatasetEnvironmentBase::score(std::string_view response) const {
  std::string tests;
  if (options_.reward.kind == RewardKind::Code) {
    const json meta = json::parse(row().metadata_json);
    const auto it = meta.find("tests");
    if (it != meta.end()) tests = it->is_string() ? it->get<std::string>() : it->dump();
  }
  return reward_.score({response, row().answer, tests, prompt_, row().metadata_json});
}

std::vector<std::string> DatasetEnvironmentBase::referenceActions() const {
  if (row_ == nullptr) return {};
  const json meta = json::parse(row_->metadata_json);
  const auto it = meta.find(options_.dataset.solution_field);
  if (it != meta.end() && it->is_string()) return {it->get<std::string>()};
  const RewardSpec& r = options_.reward;
  if (r.kind == RewardKind::Math) return {"\\boxed{" + mathReferenceAnswer(row_->answer) + "}"};
  if (r.kind == RewardKind::Choice) return {"\\boxed{" + row_->answer + "}"};
  if (r.kind == RewardKind::Exact) return {row_->answer};
  return {};
}

std::uint64_t DatasetEnvironmentBase::trainingId(std::uint64_t k) const {
  const std::size_t n = task_->train.train().size();
  const std::uint64_t epoch = k / n;
  if (epoch != order_epoch_ || order_.empty()) {
    order_ = task_->train.epochOrder(epoch);
    order_epoch_ = epoch;
  }
  return order_[k % n];
}

std::uint64_t DatasetEnvironmentBase::heldOutId(std::uint64_t k) const {
  if (task_->eval.empty())
    throw Error(
        fmt::format("environment {}: no held-out rows (set environment.eval or environment.eval_fraction)", name()));
  return kEvalBit | (k % task_->eval.size());
}

std::vector<Environment::HeldOutSet> DatasetEnvironmentBase::heldOutSets() const {
  std::vector<HeldOutSet> sets{{"held_out", task_->eval.size()}};
  for (const auto& set : task_->sets) sets.push_back({set.name, set.rows.size()});
  return sets;
}

std::uint64_t DatasetEnvironmentBase::heldOutSetId(std::size_t set, std::uint64_t k) const {
  if (set == 0) return heldOutId(k);
  if (set > task_->sets.size() || k >= task_->sets[set - 1].rows.size())
    throw Error(
        fmt::format("environment {}: no row {} in evaluation set {} of {}", name(), k, set, task_->sets.size() + 1));
  return kEvalBit | (std::uint64_t{set} << kSetShift) | k;
}

std::string DatasetEnvironmentBase::referenceAnswer(std::uint64_t problem_id) const { return rowOf(problem_id).answer; }

std::optional<std::string> DatasetEnvironmentBase::problemText() const {
  if (row_ == nullptr) return std::nullopt;
  if (!row_->prompt.empty()) return row_->prompt;
  const json messages = json::parse(row_->messages_json);
  for (auto it = messages.rbegin(); it != messages.rend(); ++it)
    if (it->value("role", "") == "user" && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

std::map<std::string, std::string> DatasetEnvironmentBase::metadata() const {
  if (row_ == nullptr) return {};
  std::map<std::string, std::string> out;
  const json meta = json::parse(row_->metadata_json);  // items() does not keep a temporary alive
  for (const auto& [key, value] : meta.items()) out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return out;
}

std::unique_ptr<Environment> makeDatasetEnvironment(const EnvironmentOptions& options) {
  if (!options.mcp_servers.empty()) return makeDatasetToolEnvironment(options);  // multi-turn, the servers' tools
  return std::make_unique<DatasetEnvironment>(options);
}

}  // namespace detail

std::unique_ptr<Tokenizer> makeEnvironmentTokenizer(const EnvironmentOptions& options) {
  if (!usesPolicyTokenizer(options.name)) return makeTaskTokenizer();
  const auto& folders = options.dataset.tokenizer_folders;
  if (folders.empty()) throw Error("environment dataset: no policy folder to take the tokenizer from");
  const std::filesystem::path first = std::filesystem::path(folders[0]) / "tokenizer.json";
  auto tokenizer = HfTokenizer::load(first);
  for (std::size_t i = 1; i < folders.size(); ++i) {
    if (folders[i] == folders[0]) continue;
    const std::filesystem::path other = std::filesystem::path(folders[i]) / "tokenizer.json";
    if (fileBytes(other) != fileBytes(first))
      throw Error(fmt::format("environment dataset: {} and {} differ; the policies of a run share one tokenizer",
                              first.string(), other.string()));
  }
  return tokenizer;
}

}  // namespace astraflow
