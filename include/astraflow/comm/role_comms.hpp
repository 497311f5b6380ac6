#pragma once
// The communicators of one process, split from MPI_COMM_WORLD by the layout (docs/architecture.md §2):
//   world      a duplicate of MPI_COMM_WORLD (errors return)
//   role       the ranks of this rank's role group: the dataflow rank, the trainer group of
//              one policy, or all rollout ranks
//   pools[i]   dataflow rank (comm rank 0) + the rollout ranks of pool i; null on non-members
//   trainer_links[p]  dataflow rank (comm rank 0) + the trainer ranks of policy p
//   weight_links[p]   dataflow rank (comm rank 0) + the trainer ranks of policy p + every rollout
//                     rank that serves p: the weight store of p lives here. (A pool spawned or
//                     joined later gets a mirror of the published version on its own pool comm;
//                     see the elastic and cross-site issues.)
// Every RMA window a pool or trainer group uses is created on its pool / link comm, hosted by
// the dataflow rank (rank 0 there).
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/layout.hpp"

namespace astraflow {

struct RoleComms {
  Comm world;
  Comm role;
  std::vector<Comm> pools;
  std::vector<Comm> trainer_links;
  std::vector<Comm> weight_links;  // indexed like RoleMap::trainerGroups()

  // Collective over MPI_COMM_WORLD; same order on all ranks.
  static RoleComms split(const RoleMap& map);
  // The same over `base` (a spawned pool's merged comm, whose rank 0 is the dataflow rank).
  static RoleComms split(const RoleMap& map, const Comm& base);

  // Gives up every communicator without freeing it (a member was lost; see Comm::abandon).
  void abandon() noexcept;

 private:
  static RoleComms splitFrom(const RoleMap& map, MPI_Comm base);
};

}  // namespace astraflow
