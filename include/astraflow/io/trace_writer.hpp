#pragma once
// Timeline traces (docs/runtime-notes.md, "Trace events"): one table of events per file, readable by
// h5py/h5dump without astraflow.
//
// Layout of a trace file:
//   attributes  format = "astraflow-trace", format_version = 3
//   /events     1-D, chunked, extendible; compound {rank int32, role string(16),
//               kind string(24), t_start float64, t_end float64, version int64, bytes uint64,
//               count uint64, policy int32, staleness int32, total uint64}
//               (what each kind puts in them: docs/runtime-notes.md, "Trace events")
//
// Times are seconds as doubles; the caller picks the clock. Runs record mpiSeconds() (MPI_Wtime) minus the
// run's start time, so events of different ranks share one axis up to clock skew.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "astraflow/core/trace_event.hpp"
#include "astraflow/io/flush_clock.hpp"
#include "astraflow/io/h5.hpp"

namespace astraflow::io {

using astraflow::TraceEvent;

inline constexpr std::size_t kTraceRoleBytes = 16;
inline constexpr std::size_t kTraceKindBytes = 24;
inline constexpr std::int64_t kTraceFormatVersion = 3;

// Records the events of one rank (or of the rank that gathers them) into one file. Not
// thread-safe; one writer per file (HDF5 allows no more outside collective I/O).
//
// Events are buffered and appended every `flush_every` events, at the first event after
// `flush_seconds` (setFlushSeconds; run.flush_seconds), on flush() and on destruction; each
// append is followed by H5Fflush, so a crash loses at most the buffered events and leaves the
// file readable. markCleanEnd() stamps a file whose rank finished its role: a killed run's
// per-rank files say which ranks ended and which did not (`astraflow trace`).
class TraceWriter final : public TraceSink {
 public:
  // Creates (truncates) `path`.
  explicit TraceWriter(const std::string& path, std::size_t flush_every = 256);
  ~TraceWriter() override;  // flushes; a failure is logged, not thrown
  TraceWriter(TraceWriter&&) noexcept = default;
  TraceWriter& operator=(TraceWriter&& other) noexcept;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void record(const TraceEvent& event) override;
  // Appends many events at once, bypassing the buffer's size trigger (used by merging).
  void recordAll(const std::vector<TraceEvent>& events);
  void flush();
  void setFlushSeconds(double seconds) { clock_ = FlushClock(seconds); }
  // Stamps the file with its run's id (core/run_files.hpp).
  void tagRun(const std::string& run_id) { file_.writeAttribute("run_id", run_id); }
  // Flushes and stamps the file: its rank ended its role (attribute clean_end = 1).
  void markCleanEnd();

  std::size_t eventsWritten() const noexcept { return written_; }  // on disk
  std::size_t eventsBuffered() const noexcept { return buffer_.size(); }
  const std::string& path() const noexcept { return file_.path(); }

 private:
  void closeQuietly() noexcept;

  H5File file_;
  H5Dataset events_;
  std::vector<TraceEvent> buffer_;
  std::size_t flush_every_ = 256;
  FlushClock clock_;
  std::size_t written_ = 0;
};

// All events of a trace file, in file order. Fails (H5Error) on a file that is not a trace
// of a known format version.
std::vector<TraceEvent> readTraceEvents(const std::string& path);

// Concatenates the events of `inputs` (per-rank trace files) into `output` (created or
// truncated; must not be one of the inputs), ordered by t_start; events with equal t_start
// keep their input order. Holds all events in memory.
// The output is stamped with `run_id` when it is not empty.
void mergeTraceFiles(const std::vector<std::string>& inputs, const std::string& output, const std::string& run_id = {});

}  // namespace astraflow::io
