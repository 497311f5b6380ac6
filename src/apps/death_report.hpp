#pragma once
#include "astraflow/comm/comm.hpp"
#include "astraflow/core/layout.hpp"

namespace astraflow {

// When a rank dies (SIGKILL, a crash), Open MPI's launcher ends the job by sending SIGTERM to
// every surviving rank; its own message names only the dead rank's number. This installs a
// SIGTERM handler that names it with its role: each survivor checks which ranks on its own node
// are gone (kill(pid, 0)), and the lowest-numbered survivor on that node prints, e.g.
//   astraflow: rank 3 (rollout:pool2, pid 4711 on node7) died; the job stops (a lost rank is
//   not survivable until elastic rollout pools exist)
// Everything printed is prepared here; the handler only calls kill, write and _exit.
// Collective over world (it gathers every rank's pid and host).
void installDeathReport(const Comm& world, const RoleMap& map);

}  // namespace astraflow
