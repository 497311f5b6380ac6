// At 4 ranks each rank gets the role the config gives it, and the split communicators hold
// exactly the ranks docs/architecture.md §2 says, with the dataflow rank first in pool/link comms.
#include <gtest/gtest.h>

#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"

using namespace astraflow;

namespace {
const char* kFourRanks = R"(policies: [{name: solver}]
layout:
  - {role: rollout, policies: [solver], ranks: 1, pool: a}
  - {role: dataflow}
  - {role: trainer, policy: solver}
  - {role: rollout, policies: [solver], ranks: 1, pool: b}
)";
}

TEST(RoleComms, FourRanksGetTheirRolesAndComms) {
  int world = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  ASSERT_EQ(world, 4) << "registered at 4 ranks";
  const Config cfg = parseConfig(kFourRanks, "four.yaml");
  const RoleMap map(cfg, world);
  RoleComms comms = RoleComms::split(map);

  const Role expected[4] = {Role::Rollout, Role::Dataflow, Role::Trainer, Role::Rollout};
  EXPECT_EQ(map.of(me).role, expected[me]);

  // Every rank reports its role to every other: all agree with the config.
  int my_role = static_cast<int>(map.of(me).role);
  int roles[4] = {};
  MPI_Allgather(&my_role, 1, MPI_INT, roles, 1, MPI_INT, comms.world.raw());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(roles[r], static_cast<int>(expected[r])) << "rank " << r;

  const int role_size[4] = {2, 1, 1, 2};
  EXPECT_EQ(comms.role.size(), role_size[me]);

  ASSERT_EQ(comms.pools.size(), 2u);
  ASSERT_EQ(comms.trainer_links.size(), 1u);
  const bool in_pool_a = me == 0 || me == 1;
  const bool in_pool_b = me == 3 || me == 1;
  EXPECT_EQ(comms.pools[0].valid(), in_pool_a);
  EXPECT_EQ(comms.pools[1].valid(), in_pool_b);
  EXPECT_EQ(comms.trainer_links[0].valid(), me == 1 || me == 2);
  for (const Comm* c : {&comms.pools[0], &comms.pools[1], &comms.trainer_links[0]}) {
    if (!c->valid()) continue;
    EXPECT_EQ(c->size(), 2);
    EXPECT_EQ(c->rank() == 0, me == map.dataflowRank()) << "dataflow rank must be rank 0 of pool/link comms";
  }
}
