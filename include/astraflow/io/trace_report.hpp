#pragma once
// What `astraflow trace <run>` reports: per-role figures computed from a run's trace events
// (docs/architecture.md §10). The computation is a pure function of the events so that tests
// and other front ends (a JSON output) share it; printing lives in src/apps/trace_command.cpp.
//
// Event kinds read, per role (times are seconds from the run's start):
//   trainer   batch_wait, train_step (version = new version, count = trajectories,
//             bytes = tokens), weight_stage, checkpoint
//   rollout   generate (count = trajectories, bytes = policy tokens), weight_pull, task_wait
//   dataflow  publish, serve_batch, batch_staleness (version = staleness s, count =
//             trajectories with that s), stale_drop (count), checkpoint
// Any other role or kind (startup, handshake, eval, ...) counts only towards the run's wall
// span and event total. A negative duration (t_end < t_start, a recording bug) counts as 0.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/io/trace_writer.hpp"

namespace astraflow::io {

// One trainer rank (role "trainer").
struct TrainerTraceStats {
  std::int32_t rank = 0;
  std::uint64_t steps = 0;  // train_step events
  double total_step_s = 0;  // sum of train_step durations
  double mean_step_s = 0;   // total_step_s / steps; 0 without steps
  double max_step_s = 0;
  std::uint64_t batch_waits = 0;   // batch_wait events
  double total_wait_s = 0;         // sum of batch_wait durations
  double mean_wait_s = 0;          // total_wait_s / batch_waits; 0 without waits
  double wait_fraction = 0;        // total_wait_s / (total_wait_s + total_step_s); 0 if both 0
  std::uint64_t trajectories = 0;  // sum of train_step counts
  std::uint64_t tokens = 0;        // sum of train_step bytes (tokens trained)
  std::uint64_t weight_stages = 0;
  std::uint64_t checkpoints = 0;
  // The new versions of the earliest and latest train_step (by t_start); empty without steps.
  std::optional<std::int64_t> first_version{};
  std::optional<std::int64_t> last_version{};

  bool operator==(const TrainerTraceStats&) const = default;
};

// One rollout rank (role "rollout").
struct RolloutTraceStats {
  std::int32_t rank = 0;
  std::uint64_t batches = 0;       // generate events
  std::uint64_t trajectories = 0;  // sum of generate counts
  std::uint64_t tokens = 0;        // sum of generate bytes (policy tokens)
  double busy_s = 0;               // sum of generate durations
  // First start to last end over the rank's generate, weight_pull and task_wait events.
  double span_s = 0;
  // Throughputs; 0 where the denominator is 0.
  double trajectories_per_span_s = 0;
  double tokens_per_span_s = 0;
  double trajectories_per_busy_s = 0;
  double tokens_per_busy_s = 0;
  std::uint64_t weight_pulls = 0;
  std::uint64_t pull_bytes = 0;
  double mean_pull_s = 0;  // 0 without pulls
  double task_wait_s = 0;  // sum of task_wait durations

  bool operator==(const RolloutTraceStats&) const = default;
};

// Staleness of the data the trainers consumed, from the dataflow's batch_staleness events.
struct StalenessHistogram {
  std::map<std::int64_t, std::uint64_t> trajectories_by_staleness{};  // s -> trajectories
  std::uint64_t trajectories = 0;                                     // sum over all s
  double mean = 0;                                                    // trajectory-weighted; 0 if empty
  std::optional<std::int64_t> max{};                                  // largest s with trajectories

  bool operator==(const StalenessHistogram&) const = default;
};

// Summed over every rank of role "dataflow".
struct DataflowTraceStats {
  std::uint64_t versions_published = 0;  // publish events
  std::uint64_t publish_bytes = 0;
  std::optional<std::int64_t> last_published_version{};  // highest published version
  std::uint64_t batches_served = 0;                      // serve_batch events
  std::uint64_t trajectories_served = 0;
  std::uint64_t bytes_served = 0;
  std::uint64_t stale_dropped = 0;  // left the buffer stale, as of the last books_used event
  std::uint64_t checkpoints = 0;

  bool operator==(const DataflowTraceStats&) const = default;
};

struct TraceReport {
  std::size_t events = 0;                   // all events, known kinds or not
  double t_first = 0;                       // earliest time (t_start or t_end) of any event; 0 without events
  double t_last = 0;                        // latest time of any event
  double wall_s = 0;                        // t_last - t_first
  std::vector<TrainerTraceStats> trainers;  // by rank, ascending
  std::vector<RolloutTraceStats> rollouts;  // by rank, ascending
  StalenessHistogram staleness;
  DataflowTraceStats dataflow;

  bool operator==(const TraceReport&) const = default;
};

// The report of `events`, in any order (per-rank figures that depend on order sort by t_start).
TraceReport computeTraceReport(const std::vector<TraceEvent>& events);

// `run_or_trace` names a run folder (its trace.h5 is meant) or a trace file itself.
std::string traceFileOf(const std::string& run_or_trace);

// Reads and reports the trace file at `trace_path`. Throws astraflow::Error with a one-line
// message naming the file when it is missing, not an HDF5 file, not an astraflow trace, of
// another format_version, or unreadable.
TraceReport loadTraceReport(const std::string& trace_path);

// One per-rank file (`<run>/trace/rank_<r>.h5`, `spawn<k>_rank_<r>.h5`) of a run whose trace.h5
// was never merged: a run that was killed, or one still going.
struct RankTraceFile {
  std::string path;
  std::size_t events = 0;
  bool clean_end = false;  // its rank finished its role (TraceWriter::markCleanEnd)
  std::string error;       // why it could not be read (its events are left out); empty if read

  bool operator==(const RankTraceFile&) const = default;
};

// A run's events as `astraflow trace` and `astraflow balance` read them: the merged trace.h5 when
// the run ended, else every per-rank file in <run>/trace as it is (rank_files says which ranks
// ended cleanly and which files could not be read).
struct RunEvents {
  std::string source;                     // the trace file, or the trace/ folder read rank by rank
  std::vector<RankTraceFile> rank_files;  // empty when source is a merged trace
  std::vector<TraceEvent> events;
};

// `run_or_trace`: a run folder or a trace file. Throws astraflow::Error as loadTraceReport does,
// or when a run folder has neither trace.h5 nor a readable per-rank file.
RunEvents readRunEvents(const std::string& run_or_trace);

struct RunTrace {
  std::string source;
  std::vector<RankTraceFile> rank_files;
  TraceReport report;
};
// readRunEvents, reported.
RunTrace loadRunTrace(const std::string& run_or_trace);

// The key/value pairs of a flat JSON object (a run's summary.json), in file order. Strings
// are given without quotes; numbers, booleans and null as JSON writes them; a nested value as
// compact JSON. Throws astraflow::Error naming the file when it is missing, not JSON, or not
// an object.
std::vector<std::pair<std::string, std::string>> readRunSummary(const std::string& path);

}  // namespace astraflow::io
