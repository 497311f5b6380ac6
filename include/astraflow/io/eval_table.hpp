#pragma once
// The evaluation table, <run>/eval.h5 (docs/analysis.md "Evaluation table"): every round's
// scores per set and every problem's samples, appended as rounds finish, readable by h5py.
//
// Layout (attributes format = "astraflow-eval", format_version = 1, run_id when tagged). Every
// dataset is 1-D, chunked and extendible; within a group all have one row per entry.
//   /rounds    round, version, version_low (int64), t_start, t_end, mean_accuracy,
//              mean_pass_at_k (float64): one row per round; `version` is the highest weight version
//              that answered (in `astraflow run` every answer's: version_low == version)
//   /sets      round, problems, samples (int64), name (string), accuracy, pass_at_k (float64)
//   /problems  round, index, samples, sample_offset (int64), problem_id (uint64), set, answer
//              (string), mean_reward (float64), solved (int32)
//   /samples   reward (float64), response (string): problem i's samples are rows
//              sample_offset[i] : sample_offset[i] + samples[i]
// A string holds its text up to a first NUL.
#include <cstdint>
#include <string>

#include "astraflow/core/eval_records.hpp"
#include "astraflow/io/h5.hpp"

namespace astraflow::io {

inline constexpr std::int64_t kEvalFormatVersion = 1;

// Appends rounds to one file; one writer per file (the dataflow rank, or `astraflow eval`).
class EvalTableWriter {
 public:
  // Opens `path` to append after its rounds, creating it when missing (or always, `truncate`).
  // H5Error for an existing file of another format or version.
  EvalTableWriter(const std::string& path, bool truncate);
  // Appends the round as number rounds() and flushes the file.
  void write(const EvalRoundResult& round);
  std::int64_t rounds() const { return rounds_; }
  void tagRun(const std::string& run_id) { file_.writeAttribute("run_id", run_id); }
  const std::string& path() const noexcept { return file_.path(); }

 private:
  H5File file_;
  std::int64_t rounds_ = 0;
  std::uint64_t samples_ = 0;  // rows of /samples
};

}  // namespace astraflow::io
