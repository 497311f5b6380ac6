#pragma once
// `astraflow trace <run> --balance K` (src/apps/balance_replay.cpp).
#include <string>
#include <vector>

#include "astraflow/dataflow/balance.hpp"
#include "astraflow/io/trace_writer.hpp"

namespace astraflow {

// Balance reports for every window (V−K, V] with V a multiple of K, from a trace's events.
// Throws Error when the trace lacks what they need (trainer steps, the dataflow's books).
std::vector<BalanceReport> replayBalance(const std::vector<io::TraceEvent>& events, const BalanceParams& params);

// Prints them (text: the paper's template; json: an array of the report objects). Returns the
// exit code: 0, or 2 after one line naming the file.
int balanceCommand(const std::string& run_or_trace, int every, const std::string& format);

}  // namespace astraflow
