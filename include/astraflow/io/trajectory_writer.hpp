#pragma once
// The run's trajectory log, <run>/trajectories.h5 (docs/architecture.md §10): every finished
// trajectory as one row, readable by h5py/h5dump without astraflow.
//
// Layout of a trajectory file:
//   attributes  format = "astraflow-trajectories", format_version = 2 (version 1 had no
//               /token_versions_flat; such files are read, with no per-token versions)
//   One row per trajectory. Every dataset below except the two *_flat ones and /policy_names
//   is 1-D, chunked, extendible and has one row per trajectory, in append order.
//     /tokens               vlen int32   token ids
//     /policy_mask          vlen int32   0/1 per token (uint8 in memory; HDF5 vlen here is int32)
//     /behav_logprobs_flat  float32      the behaviour log-probs of all rows, concatenated
//     /token_versions_flat  int64        the weight version that sampled each token, all rows
//                                        concatenated as the log-probs are (-1: a context token)
//     /token_offset         uint64       where the row's log-probs and versions start in the
//                                        *_flat datasets; there are len(tokens[i]) of them:
//                                        flat[token_offset[i] : token_offset[i] + len(tokens[i])]
//     /reward               float64      rewards[0]; NaN when the trajectory has no reward
//     /policy               int32        index into /policy_names
//     /policy_names         vlen string  one row per distinct policy name, in first-seen order
//     /task_id /problem_id /group_id                  uint64
//     /group_index /pool_uid /turns                   int64 (uint32 in memory)
//     /weight_version_min /weight_version_max         int64
//     /producer_rank /status                          int32
//     /t_queued /t_started /t_finished                float64, seconds on the run clock
//
// Log-probs are a flat array plus start offsets because h5.hpp's variable-length data is int32
// only; the offsets make each row a single slice in h5py, and the row's length is its tokens'.
// Stored lossily: only rewards[0]. readTrajectories gives back rewards = {reward}, so a
// trajectory stored without a reward comes back with rewards = {NaN}.
//
// A crash between two flushes can leave the datasets with different row counts (they are
// appended one after another); the reader then keeps the rows all datasets have, and
// openForAppend refuses the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "astraflow/core/records.hpp"
#include "astraflow/io/flush_clock.hpp"
#include "astraflow/io/h5.hpp"

namespace astraflow::io {

inline constexpr std::int64_t kTrajectoryFormatVersion = 2;

// Appends trajectories to one file. Not thread-safe; one writer per file (HDF5 allows no more
// outside collective I/O), normally on the dataflow rank.
//
// Trajectories are buffered and appended every `flush_every` trajectories, at the first one
// after `flush_seconds` (setFlushSeconds; run.flush_seconds), on flush() and on destruction; each append is followed by
// H5Fflush, so a crash loses at most the buffered trajectories. After a failed append (an H5Error from append or flush)
// the writer refuses further appends, since the datasets may no longer line up.
class TrajectoryWriter {
 public:
  // Creates (truncates) `path`.
  explicit TrajectoryWriter(const std::string& path, std::size_t flush_every = 256);
  // Opens an existing trajectory file and appends after its rows (`astraflow run --resume`).
  // Fails (H5Error) on a missing file, one of another format or version, or one whose
  // datasets have different row counts.
  static TrajectoryWriter openForAppend(const std::string& path, std::size_t flush_every = 256);

  ~TrajectoryWriter();  // flushes; a failure is logged, not thrown
  TrajectoryWriter(TrajectoryWriter&&) noexcept = default;
  TrajectoryWriter& operator=(TrajectoryWriter&& other) noexcept;
  TrajectoryWriter(const TrajectoryWriter&) = delete;
  TrajectoryWriter& operator=(const TrajectoryWriter&) = delete;

  // Throws Error, before buffering anything, for a trajectory the layout cannot hold:
  // behav_logprobs or policy_mask not one per token, or a policy name containing a NUL.
  void append(const Trajectory& trajectory);
  void flush();
  void setFlushSeconds(double seconds) { clock_ = FlushClock(seconds); }
  // Stamps the file with its run's id (core/run_files.hpp).
  void tagRun(const std::string& run_id) { file_.writeAttribute("run_id", run_id); }

  std::size_t rowsWritten() const noexcept { return rows_; }  // on disk, earlier sessions' included
  std::size_t rowsBuffered() const noexcept { return buffer_.size(); }
  const std::string& path() const noexcept { return file_.path(); }

 private:
  TrajectoryWriter(H5File file, std::size_t flush_every);
  void writeBuffer();
  std::int32_t policyIndex(const std::string& name);
  void closeQuietly() noexcept;

  H5File file_;
  H5Dataset tokens_, policy_mask_, logprobs_flat_, versions_flat_, token_offset_, reward_, policy_, policy_names_;
  std::vector<H5Dataset> columns_;  // the plain scalar columns, in forEachColumn order
  std::vector<Trajectory> buffer_;
  std::vector<std::string> names_;  // /policy_names, those not yet on disk included
  std::unordered_map<std::string, std::int32_t> name_index_;
  std::size_t names_written_ = 0;
  std::uint64_t flat_size_ = 0;  // rows of the *_flat datasets: where the next row's values start
  std::size_t flush_every_ = 256;
  FlushClock clock_;
  std::size_t rows_ = 0;
  bool failed_ = false;
};

// All trajectories of a file, in file order (see the layout above for what comes back of
// rewards). Fails (H5Error) on a file that is not a trajectory file of a known format version,
// or whose rows do not fit together (an offset past the log-probs, an unknown policy index).
std::vector<Trajectory> readTrajectories(const std::string& path);

}  // namespace astraflow::io
