#pragma once
#include <string>

namespace astraflow {

// `astraflow trace <run>`: prints per-role tables for the run's trace.h5 (and the key/values
// of summary.json next to it, when present). `run_or_trace` is a run folder or a trace file.
// Needs no MPI. Returns the process exit code: 0, or 2 after one `astraflow: ...` line on
// stderr naming the file that could not be used.
int traceCommand(const std::string& run_or_trace);

}  // namespace astraflow
