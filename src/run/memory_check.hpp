#pragma once
// The memory plan checked at the start of a run (run.memory_check), before the windows, the
// models and the engines are allocated: collective over `world`.
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/run/memory_plan.hpp"

namespace astraflow {

// Every rank's plan (the same on every rank). The dataflow rank groups the ranks by node, adds
// what they hold already to the node's available memory, prints each node's plan and decides;
// a node whose plan does not fit stops the run on every rank with one ConfigError naming the
// largest items (refuse), or is logged as a warning (warn). Off: nothing is checked or printed.
std::vector<RankMemoryPlan> checkMemoryPlan(const Config& cfg, const RoleMap& map, const Comm& world);

}  // namespace astraflow
