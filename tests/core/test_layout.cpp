// RoleMap: ranks get roles in layout order; a world of the wrong size is refused with the
// message users see from mpirun.
#include <gtest/gtest.h>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/layout.hpp"

using namespace astraflow;

namespace {
const char* kLayout = R"(policies: [{name: solver}, {name: verifier}]
layout:
  - {role: trainer, policy: solver, ranks: 2}
  - {role: dataflow}
  - {role: rollout, policies: [solver], ranks: 2, pool: near}
  - {role: trainer, policy: verifier}
  - {role: rollout, policies: [solver, verifier], pool: far}
)";
}

TEST(Layout, RanksFollowTheLayoutInOrder) {
  const Config c = parseConfig(kLayout, "l.yaml");
  const RoleMap map(c, 7);
  EXPECT_EQ(map.dataflowRank(), 2);
  EXPECT_EQ(map.of(0).role, Role::Trainer);
  EXPECT_EQ(map.of(1).label(), "trainer:solver");
  EXPECT_EQ(map.of(1).index_in_group, 1);
  EXPECT_EQ(map.of(2).label(), "dataflow");
  EXPECT_EQ(map.of(3).label(), "rollout:near");
  EXPECT_EQ(map.of(4).pool, 0);
  EXPECT_EQ(map.of(5).label(), "trainer:verifier");
  EXPECT_EQ(map.of(6).pool, 1);
  ASSERT_EQ(map.pools().size(), 2u);
  EXPECT_EQ(map.pools()[0].world_ranks, (std::vector<int>{3, 4}));
  EXPECT_EQ(map.pools()[1].policies, (std::vector<std::string>{"solver", "verifier"}));
  ASSERT_EQ(map.trainerGroups().size(), 2u);
  EXPECT_EQ(map.trainerGroups()[0].world_ranks, (std::vector<int>{0, 1}));
  const std::string table = map.describe();
  EXPECT_NE(table.find("far [solver,verifier]"), std::string::npos) << table;
  EXPECT_NE(table.find("0-1"), std::string::npos) << table;
}

TEST(Layout, WrongWorldSizeIsRefusedWithCounts) {
  const Config c = parseConfig(kLayout, "l.yaml");
  try {
    RoleMap map(c, 4);
    FAIL() << "accepted a 4-rank world for a 7-rank layout";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("layout needs 7 ranks, mpirun started 4"), std::string::npos) << e.what();
  }
}
