// computeTraceReport, loadTraceReport and readRunSummary (see trace_report.hpp).
#include "astraflow/io/trace_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "astraflow/core/error.hpp"
#include "astraflow/core/trace_kinds.hpp"
#include "astraflow/io/h5.hpp"

namespace astraflow::io {
namespace {

// Event durations feed sums and maxima; a reversed interval must not subtract time.
double durationOf(const TraceEvent& e) { return std::max(0.0, e.t_end - e.t_start); }

double ratioOrZero(double numerator, double denominator) { return denominator > 0 ? numerator / denominator : 0.0; }

// What one trainer rank adds up before the means and fractions are taken.
struct TrainerAccumulator {
  TrainerTraceStats stats;
  double first_step_start = std::numeric_limits<double>::infinity();
  double last_step_start = -std::numeric_limits<double>::infinity();
};

// What one rollout rank adds up; the span covers the rank's known rollout events only.
struct RolloutAccumulator {
  RolloutTraceStats stats;
  double span_begin = std::numeric_limits<double>::infinity();
  double span_end = -std::numeric_limits<double>::infinity();
  double total_pull_s = 0;
};

void addTrainerEvent(TrainerAccumulator& acc, TraceKind kind, const TraceEvent& e) {
  auto& s = acc.stats;
  const double d = durationOf(e);
  switch (kind) {
    case TraceKind::TrainStep:
      ++s.steps;
      s.total_step_s += d;
      s.max_step_s = std::max(s.max_step_s, d);
      s.trajectories += e.count;
      s.tokens += e.bytes;
      // Strict < for the first and >= for the last: with equal starts, file order decides.
      if (e.t_start < acc.first_step_start) {
        acc.first_step_start = e.t_start;
        s.first_version = e.version;
      }
      if (e.t_start >= acc.last_step_start) {
        acc.last_step_start = e.t_start;
        s.last_version = e.version;
      }
      return;
    case TraceKind::BatchWait:
      ++s.batch_waits;
      s.total_wait_s += d;
      return;
    case TraceKind::WeightStage: ++s.weight_stages; return;
    case TraceKind::Checkpoint: ++s.checkpoints; return;
    default: return;
  }
}

TrainerTraceStats finishTrainer(const TrainerAccumulator& acc) {
  TrainerTraceStats s = acc.stats;
  s.mean_step_s = ratioOrZero(s.total_step_s, static_cast<double>(s.steps));
  s.mean_wait_s = ratioOrZero(s.total_wait_s, static_cast<double>(s.batch_waits));
  s.wait_fraction = ratioOrZero(s.total_wait_s, s.total_wait_s + s.total_step_s);
  return s;
}

void addRolloutEvent(RolloutAccumulator& acc, TraceKind kind, const TraceEvent& e) {
  auto& s = acc.stats;
  const double d = durationOf(e);
  switch (kind) {
    case TraceKind::Generate:
      ++s.batches;
      s.trajectories += e.count;
      s.tokens += e.bytes;
      s.busy_s += d;
      break;
    case TraceKind::WeightPull:
      ++s.weight_pulls;
      s.pull_bytes += e.bytes;
      acc.total_pull_s += d;
      break;
    case TraceKind::TaskWait: s.task_wait_s += d; break;
    default: return;  // other kinds (startup, eval_generate, ...) do not stretch the active span
  }
  acc.span_begin = std::min({acc.span_begin, e.t_start, e.t_end});
  acc.span_end = std::max(acc.span_end, std::max(e.t_start, e.t_end));
}

RolloutTraceStats finishRollout(const RolloutAccumulator& acc) {
  RolloutTraceStats s = acc.stats;
  s.span_s = acc.span_end > acc.span_begin ? acc.span_end - acc.span_begin : 0.0;
  const auto trajectories = static_cast<double>(s.trajectories);
  const auto tokens = static_cast<double>(s.tokens);
  s.trajectories_per_span_s = ratioOrZero(trajectories, s.span_s);
  s.tokens_per_span_s = ratioOrZero(tokens, s.span_s);
  s.trajectories_per_busy_s = ratioOrZero(trajectories, s.busy_s);
  s.tokens_per_busy_s = ratioOrZero(tokens, s.busy_s);
  s.mean_pull_s = ratioOrZero(acc.total_pull_s, static_cast<double>(s.weight_pulls));
  return s;
}

void addDataflowEvent(TraceReport& report, TraceKind kind, const TraceEvent& e, double& last_books_t) {
  auto& d = report.dataflow;
  switch (kind) {
    case TraceKind::Publish:
      ++d.versions_published;
      d.publish_bytes += e.bytes;
      d.last_published_version = std::max(d.last_published_version.value_or(e.version), e.version);
      return;
    case TraceKind::ServeBatch:
      ++d.batches_served;
      d.trajectories_served += e.count;
      d.bytes_served += e.bytes;
      return;
    case TraceKind::BatchStaleness:
      if (e.count > 0 && e.staleness >= 0) report.staleness.trajectories_by_staleness[e.staleness] += e.count;
      return;
    case TraceKind::BooksUsed:
      // Cumulative: the latest says how many left the buffer stale (total = consumed + stale).
      if (e.t_start >= last_books_t && e.total >= e.count) {
        last_books_t = e.t_start;
        d.stale_dropped = e.total - e.count;
      }
      return;
    case TraceKind::Checkpoint: ++d.checkpoints; return;
    default: return;
  }
}

void finishStaleness(StalenessHistogram& h) {
  double weighted = 0;
  for (const auto& [s, n] : h.trajectories_by_staleness) {
    h.trajectories += n;
    weighted += static_cast<double>(s) * static_cast<double>(n);
  }
  h.mean = ratioOrZero(weighted, static_cast<double>(h.trajectories));
  if (!h.trajectories_by_staleness.empty()) h.max = h.trajectories_by_staleness.rbegin()->first;
}

// The first line of a library message: H5Error carries HDF5's error stack on further lines,
// and the command prints one line.
std::string_view firstLine(std::string_view text) { return text.substr(0, text.find('\n')); }

void requireReadableFile(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(fmt::format("no {} '{}'", what, path));
  if (fs::is_directory(status)) throw Error(fmt::format("'{}' is a directory, not a {}", path, what));
  if (!std::ifstream(path, std::ios::binary).is_open()) {
    throw Error(fmt::format("cannot open {} '{}' for reading", what, path));
  }
}

// Checks the header attributes first so that the usual mistakes get a plain message; the
// reader checks them again, and anything else wrong (an attribute of another type, a missing
// table) arrives as H5Error.
void checkTraceHeader(const std::string& path) {
  std::optional<H5File> file;
  try {
    file.emplace(H5File::openReadOnly(path));
  } catch (const H5Error&) {
    throw Error(fmt::format("'{}' is not an HDF5 file (expected an astraflow trace)", path));
  }
  const std::string format = file->hasAttribute("format") ? file->readStringAttribute("format") : "";
  if (format != "astraflow-trace") {
    throw Error(fmt::format("'{}' is not an astraflow trace (attribute format is '{}')", path,
                            format.empty() ? "missing" : format));
  }
  const std::int64_t version = file->hasAttribute("format_version") ? file->readInt64Attribute("format_version") : -1;
  if (version != kTraceFormatVersion) {
    throw Error(
        fmt::format("trace '{}' has format_version {}, this build reads {}", path, version, kTraceFormatVersion));
  }
}

}  // namespace

TraceReport computeTraceReport(const std::vector<TraceEvent>& events) {
  TraceReport report;
  report.events = events.size();
  std::map<std::int32_t, TrainerAccumulator> trainers;
  std::map<std::int32_t, RolloutAccumulator> rollouts;
  double last_books_t = -std::numeric_limits<double>::infinity();
  if (!events.empty()) report.t_first = report.t_last = events.front().t_start;
  for (const auto& e : events) {
    report.t_first = std::min({report.t_first, e.t_start, e.t_end});
    report.t_last = std::max({report.t_last, e.t_start, e.t_end});
    const auto kind = traceKindOf(e.kind);
    if (!kind) continue;  // a plug-in counter, or a kind of a newer writer
    if (e.role == "trainer") {
      auto& acc = trainers[e.rank];
      acc.stats.rank = e.rank;
      addTrainerEvent(acc, *kind, e);
    } else if (e.role == "rollout") {
      auto& acc = rollouts[e.rank];
      acc.stats.rank = e.rank;
      addRolloutEvent(acc, *kind, e);
    } else if (e.role == "dataflow") {
      addDataflowEvent(report, *kind, e, last_books_t);
    }
  }
  report.wall_s = report.t_last - report.t_first;
  for (const auto& [rank, acc] : trainers) report.trainers.push_back(finishTrainer(acc));
  for (const auto& [rank, acc] : rollouts) report.rollouts.push_back(finishRollout(acc));
  finishStaleness(report.staleness);
  return report;
}

std::string traceFileOf(const std::string& run_or_trace) {
  std::error_code ec;
  if (std::filesystem::is_directory(run_or_trace, ec)) {
    return (std::filesystem::path(run_or_trace) / "trace.h5").string();
  }
  return run_or_trace;
}

TraceReport loadTraceReport(const std::string& trace_path) {
  requireReadableFile(trace_path, "trace file");
  std::vector<TraceEvent> events;
  try {
    checkTraceHeader(trace_path);
    events = readTraceEvents(trace_path);
  } catch (const H5Error& e) {
    throw Error(fmt::format("cannot read trace '{}': {}", trace_path, firstLine(e.what())));
  }
  return computeTraceReport(events);
}

RunEvents readRunEvents(const std::string& run_or_trace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path run(run_or_trace);
  const fs::path folder = run / "trace";
  if (!fs::is_directory(run, ec) || fs::exists(run / "trace.h5", ec) || !fs::is_directory(folder, ec)) {
    const auto path = traceFileOf(run_or_trace);
    requireReadableFile(path, "trace file");
    RunEvents out{path, {}, {}};
    try {
      checkTraceHeader(path);
      out.events = readTraceEvents(path);
    } catch (const H5Error& e) {
      throw Error(fmt::format("cannot read trace '{}': {}", path, firstLine(e.what())));
    }
    return out;
  }
  // Not merged: the run was killed (or is still going). Each rank's file is as its last flush left it.
  // A rank still writing its file holds HDF5's lock on it; this process only reads, and each
  // writer flushes after every append, so the lock is not needed to read the appended events (a
  // read that races an append fails and names that file). A user's own setting wins.
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 0);
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const auto name = entry.path().filename().string();
    const bool per_rank = name.rfind("rank_", 0) == 0 || name.rfind("spawn", 0) == 0;
    if (per_rank && entry.path().extension() == ".h5") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  RunEvents out{folder.string(), {}, {}};
  std::size_t readable = 0;
  for (const auto& path : paths) {
    RankTraceFile f{path.string(), 0, false, {}};
    try {
      checkTraceHeader(f.path);
      auto mine = readTraceEvents(f.path);
      const auto file = H5File::openReadOnly(f.path);
      f.clean_end = file.hasAttribute("clean_end") && file.readInt64Attribute("clean_end") == 1;
      f.events = mine.size();
      out.events.insert(out.events.end(), mine.begin(), mine.end());
      ++readable;
    } catch (const std::exception& e) {  // H5Error or Error: this file is left out, the others are read
      f.error = std::string(firstLine(e.what()));
    }
    out.rank_files.push_back(std::move(f));
  }
  // In time order, as mergeTraceFiles would have written them.
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.t_start < b.t_start; });
  if (readable == 0) {
    throw Error(fmt::format("no trace file '{}' and no readable per-rank file in '{}'{}", (run / "trace.h5").string(),
                            folder.string(), out.rank_files.empty() ? "" : " (" + out.rank_files.front().error + ")"));
  }
  return out;
}

RunTrace loadRunTrace(const std::string& run_or_trace) {
  auto run = readRunEvents(run_or_trace);
  return RunTrace{std::move(run.source), std::move(run.rank_files), computeTraceReport(run.events)};
}

std::vector<std::pair<std::string, std::string>> readRunSummary(const std::string& path) {
  requireReadableFile(path, "summary file");
  std::ifstream in(path);
  // ordered_json keeps the writer's key order, which groups related figures.
  const auto json = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw Error(fmt::format("'{}' is not valid JSON", path));
  if (!json.is_object()) throw Error(fmt::format("'{}' holds a JSON {}, expected an object", path, json.type_name()));
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(json.size());
  for (const auto& [key, value] : json.items()) {
    entries.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  return entries;
}

}  // namespace astraflow::io
