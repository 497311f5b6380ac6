#pragma once
// A RaaS rank's loop (docs/architecture.md, "Roles") and the ports it is given: the ring it
// takes tasks from, the ring it returns trajectories on, and the weight store of each policy
// its pool serves. It knows nothing of batches, staleness or trainers.
#include <string>
#include <utility>
#include <vector>

#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_context.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"

namespace astraflow {

// One policy a rollout rank serves.
struct ServedStore {
  std::string policy;
  int group = 0;  // its trainer group's index: trace events name the policy by it
  WeightStore* store = nullptr;
  NodeWeights* node = nullptr;  // the store's versions as this rank's node shares them
};

struct RolloutPorts {
  explicit RolloutPorts(RoleContext c) : ctx(std::move(c)) {}

  RoleContext ctx;
  int pool = 0;                     // the pool's index in the layout: trajectories carry it as pool_uid
  RmaRing* tasks = nullptr;         // popped: tasks from the dataflow rank
  RmaRing* trajectories = nullptr;  // pushed: trajectories back to it
  std::vector<ServedStore> served;  // the pool's policies, in its layout order
  RolloutBackendSpec backend;       // how the pool generates (layout[i].backend)
  int index_in_pool = 0;            // this rank's place in its pool (an http pool's url: urls[index % size])
};

// Runs until the end-of-stream task; the last record it pushes is an end-of-stream trajectory.
RolloutReport runRolloutRole(const RolloutPorts& ports);

}  // namespace astraflow
