// EvalTableWriter (layout in eval_table.hpp).
#include "astraflow/io/eval_table.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

constexpr const char* kEvalFormatName = "astraflow-eval";
constexpr std::uint64_t kEvalChunkRows = 1024;

// Column lists: one place names each group's datasets for creating them.
constexpr const char* kInt64Columns[] = {
    "rounds/round", "rounds/version", "rounds/version_low", "sets/round",       "sets/problems",
    "sets/samples", "problems/round", "problems/index",     "problems/samples", "problems/sample_offset"};
constexpr const char* kFloat64Columns[] = {"rounds/t_start",        "rounds/t_end",  "rounds/mean_accuracy",
                                           "rounds/mean_pass_at_k", "sets/accuracy", "sets/pass_at_k",
                                           "problems/mean_reward",  "samples/reward"};
constexpr const char* kUInt64Columns[] = {"problems/problem_id"};
constexpr const char* kStringColumns[] = {"sets/name", "problems/set", "problems/answer", "samples/response"};

void create(const H5File& file) {
  file.writeAttribute("format", kEvalFormatName);
  file.writeAttribute("format_version", kEvalFormatVersion);
  for (const char* c : kInt64Columns) file.createExtendible<std::int64_t>(c, 0, kEvalChunkRows);
  for (const char* c : kFloat64Columns) file.createExtendible<double>(c, 0, kEvalChunkRows);
  for (const char* c : kUInt64Columns) file.createExtendible<std::uint64_t>(c, 0, kEvalChunkRows);
  for (const char* c : kStringColumns) file.createStrings(c, kEvalChunkRows);
  file.createExtendible<std::int32_t>("problems/solved", 0, kEvalChunkRows);
}

template <class T>
void append(const H5File& file, const char* column, const std::vector<T>& values) {
  if (!values.empty()) file.openDataset(column).appendRows(values);
}

void appendStrings(const H5File& file, const char* column, const std::vector<std::string>& values) {
  if (!values.empty()) file.openDataset(column).appendStrings(values);
}

}  // namespace

EvalTableWriter::EvalTableWriter(const std::string& path, bool truncate) {
  if (truncate || !std::filesystem::exists(path)) {
    file_ = H5File::create(path);
    create(file_);
    return;
  }
  file_ = H5File::openReadWrite(path);
  const std::string format = file_.hasAttribute("format") ? file_.readStringAttribute("format") : "(none)";
  if (format != kEvalFormatName || file_.readInt64Attribute("format_version") != kEvalFormatVersion)
    ASTRA_H5_FAIL(fmt::format("'{}' is not an astraflow evaluation table of format version {} (format '{}')", path,
                              kEvalFormatVersion, format));
  rounds_ = static_cast<std::int64_t>(file_.openDataset("rounds/round").rows());
  samples_ = file_.openDataset("samples/reward").rows();
}

void EvalTableWriter::write(const EvalRoundResult& round) {
  const std::int64_t n = rounds_;
  append(file_, "rounds/round", std::vector<std::int64_t>{n});
  append(file_, "rounds/version", std::vector<std::int64_t>{round.version_high});
  append(file_, "rounds/version_low", std::vector<std::int64_t>{round.version_low});
  append(file_, "rounds/t_start", std::vector<double>{round.t_start});
  append(file_, "rounds/t_end", std::vector<double>{round.t_end});
  append(file_, "rounds/mean_accuracy", std::vector<double>{round.meanAccuracy()});
  append(file_, "rounds/mean_pass_at_k", std::vector<double>{round.meanPassAtK()});

  std::vector<std::int64_t> set_round, set_problems, set_samples;
  std::vector<std::string> set_names;
  std::vector<double> set_accuracy, set_pass;
  for (const auto& s : round.sets) {
    set_round.push_back(n);
    set_problems.push_back(static_cast<std::int64_t>(s.problems));
    set_samples.push_back(s.samples);
    set_names.push_back(s.name);
    set_accuracy.push_back(s.accuracy);
    set_pass.push_back(s.pass_at_k);
  }
  append(file_, "sets/round", set_round);
  append(file_, "sets/problems", set_problems);
  append(file_, "sets/samples", set_samples);
  appendStrings(file_, "sets/name", set_names);
  append(file_, "sets/accuracy", set_accuracy);
  append(file_, "sets/pass_at_k", set_pass);

  std::vector<std::int64_t> p_round, p_index, p_samples, p_offset;
  std::vector<std::uint64_t> p_id;
  std::vector<std::string> p_set, p_answer, responses;
  std::vector<double> p_mean, rewards;
  std::vector<std::int32_t> p_solved;
  for (const auto& p : round.problems) {
    p_round.push_back(n);
    p_index.push_back(static_cast<std::int64_t>(p.index));
    p_samples.push_back(static_cast<std::int64_t>(p.rewards.size()));
    p_id.push_back(p.problem_id);
    p_offset.push_back(static_cast<std::int64_t>(samples_ + rewards.size()));
    p_set.push_back(p.set < round.sets.size() ? round.sets[p.set].name : std::string());
    p_answer.push_back(p.answer);
    p_mean.push_back(p.meanReward());
    p_solved.push_back(p.solved() ? 1 : 0);
    for (std::size_t i = 0; i < p.rewards.size(); ++i) {
      rewards.push_back(p.rewards[i]);
      responses.push_back(i < p.responses.size() ? p.responses[i] : std::string());
    }
  }
  append(file_, "problems/round", p_round);
  append(file_, "problems/index", p_index);
  append(file_, "problems/samples", p_samples);
  append(file_, "problems/problem_id", p_id);
  append(file_, "problems/sample_offset", p_offset);
  appendStrings(file_, "problems/set", p_set);
  appendStrings(file_, "problems/answer", p_answer);
  append(file_, "problems/mean_reward", p_mean);
  append(file_, "problems/solved", p_solved);
  append(file_, "samples/reward", rewards);
  appendStrings(file_, "samples/response", responses);
  samples_ += rewards.size();
  ++rounds_;
  file_.flush();
}

}  // namespace astraflow::io
