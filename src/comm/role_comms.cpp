// RoleComms::split: a rank's role, pool, trainer-link and weight-link communicators, split from the world (or a
// spawned pool's merged comm); the dataflow rank, which hosts the windows, is rank 0 of every pool and link comm.
#include "astraflow/comm/role_comms.hpp"

#include <algorithm>

namespace astraflow {

namespace {

// Key that puts the dataflow rank first (comm rank 0) and the others in world order.
int hostFirstKey(const RoleMap& map, int world_rank) { return world_rank == map.dataflowRank() ? -1 : world_rank; }

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

RoleComms RoleComms::split(const RoleMap& map) { return splitFrom(map, MPI_COMM_WORLD); }

RoleComms RoleComms::split(const RoleMap& map, const Comm& base) { return splitFrom(map, base.raw()); }

RoleComms RoleComms::splitFrom(const RoleMap& map, MPI_Comm base) {
  RoleComms c;
  c.world = Comm::duplicate(base);
  const int me = c.world.rank();
  const RankRole& mine = map.of(me);

  int color = 0;
  if (mine.role == Role::Trainer) {
    for (std::size_t g = 0; g < map.trainerGroups().size(); ++g) {
      if (map.trainerGroups()[g].policy == mine.policy) color = 1 + static_cast<int>(g);
    }
  } else if (mine.role == Role::Rollout) {
    color = 1 + static_cast<int>(map.trainerGroups().size());
  }
  c.role = c.world.split(color, me);

  for (const auto& pool : map.pools()) {
    const bool member = me == map.dataflowRank() || contains(pool.world_ranks, me);
    c.pools.push_back(c.world.split(member ? 0 : -1, hostFirstKey(map, me)));
  }
  for (const auto& group : map.trainerGroups()) {
    const bool member = me == map.dataflowRank() || contains(group.world_ranks, me);
    c.trainer_links.push_back(c.world.split(member ? 0 : -1, hostFirstKey(map, me)));
  }
  for (const auto& group : map.trainerGroups()) {
    bool member = me == map.dataflowRank() || contains(group.world_ranks, me);
    for (const auto& pool : map.pools()) {
      const bool serves = std::find(pool.policies.begin(), pool.policies.end(), group.policy) != pool.policies.end();
      if (serves && contains(pool.world_ranks, me)) member = true;
    }
    c.weight_links.push_back(c.world.split(member ? 0 : -1, hostFirstKey(map, me)));
  }
  return c;
}

void RoleComms::abandon() noexcept {
  world.abandon();
  role.abandon();
  for (auto* group : {&pools, &trainer_links, &weight_links}) {
    for (auto& c : *group) c.abandon();
  }
}

}  // namespace astraflow
