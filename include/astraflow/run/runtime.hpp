#pragma once
// The distributed run behind `astraflow run`: builds every rank's rings and weight stores,
// runs the rank's role loop, gathers the per-rank reports into `<run>/summary.json` and merges
// the per-rank traces into `<run>/trace.h5`.
#include <string>

#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"

namespace astraflow {

struct RuntimeOptions {
  std::string resume_dir;  // non-empty: continue the run in this folder from its newest checkpoint
  bool overwrite = false;  // a fresh run into a folder that holds another run removes that run's files first
};

struct RunOutcome {
  bool reporting_rank = false;  // the dataflow rank: it wrote summary.json
  std::string summary_json;     // one line; set on the reporting rank
  bool peer_lost = false;       // a spawned pool was lost: leave with _exit, not MPI_Finalize (every rank)
};

// Collective over MPI_COMM_WORLD; same order on all ranks. Throws on errors (the caller decides
// between a clean exit and MPI_Abort).
RunOutcome runRuntime(const Config& cfg, const RoleMap& map, const RoleComms& comms, const RuntimeOptions& options);

}  // namespace astraflow
