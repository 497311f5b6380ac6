#pragma once
// The role entry points of a distributed run: each cuts its role's ports out of the rank's
// wiring and runs the role's loop. Only this module sees both the wiring and every role.
#include "astraflow/core/rank_report.hpp"
#include "astraflow/dataflow/run_wiring.hpp"

namespace astraflow {

// The loop of the role `w`'s rank has in the layout (dataflow, rollout, trainer or gateway).
RoleReport runRole(RunWiring& w);
// The RaaS loop on the pool `w`'s rank belongs to (also a spawned pool's, see runSpawnedPool).
RolloutReport runRolloutOn(RunWiring& w);
TrainerReport runTrainerOn(RunWiring& w);

}  // namespace astraflow
