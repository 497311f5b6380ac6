#pragma once
#include <string>
#include <vector>

#include "astraflow/io/trace_report.hpp"
#include "astraflow/run/rank_report_files.hpp"

namespace astraflow {

// `astraflow trace <run>`: prints per-role tables for the run's trace.h5 (and the key/values
// of summary.json next to it, when present). `run_or_trace` is a run folder or a trace file.
// Needs no MPI. Returns the process exit code: 0, or 2 after one `astraflow: ...` line on
// stderr naming the file that could not be used.
// `format` "json" prints the same figures as one JSON document (traceReportJson) instead.
int traceCommand(const std::string& run_or_trace, const std::string& format = "text");

// The report as JSON: trace, events, t_first, t_last, wall_s, trainers[], rollouts[],
// staleness{}, dataflow{} (the fields of io::TraceReport, by the same names), summary (the
// run's summary.json, or null when `summary_path` is empty or unreadable) and rank_files[]
// (path, events, clean_end, error: a killed run read rank by rank; empty for a merged trace) and
// rank_reports[] (each rank's last report of such a run: rank, label, role, age_seconds,
// peak_rss_bytes, cpu_seconds, startup_cpu_seconds, memory_plan_bytes, figures{} with its scalar
// fields; or path and error).
std::string traceReportJson(const io::TraceReport& report, const std::string& trace_path,
                            const std::string& summary_path, const std::vector<io::RankTraceFile>& rank_files = {},
                            const std::vector<StoredRankReport>& rank_reports = {});

}  // namespace astraflow
