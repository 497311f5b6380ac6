// BatchAssembler: grouping, filters, the staleness bound, the admission capacity rule and
// restore — the rules of docs/architecture.md §4, without MPI.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "astraflow/dataflow/batch_assembler.hpp"

namespace astraflow {
namespace {

Trajectory member(std::uint64_t group, std::uint32_t index, std::int64_t version, double reward = 1.0) {
  Trajectory t;
  t.task_id = group * 100 + index;
  t.group_id = group;
  t.group_index = index;
  t.policy = "solver";
  t.weight_version_min = t.weight_version_max = version;
  t.tokens = {1, 5, 6};
  t.behav_logprobs = {0.f, -0.5f, -0.1f};
  t.policy_mask = {0, 1, 1};
  t.rewards = {reward};
  return t;
}

void addGroup(BatchAssembler& a, std::uint64_t group, std::int64_t version, int size = 2) {
  for (int i = 0; i < size; ++i) a.ingest(member(group, static_cast<std::uint32_t>(i), version));
}

void expectConservation(const BatchAssembler& a) {
  const auto& c = a.counters();
  EXPECT_EQ(c.accepted(), c.consumed + a.buffered());
  EXPECT_EQ(c.produced, c.accepted() + c.filtered + c.stale_dropped);
}

TEST(BatchAssembler, ServesWholeGroupsOldestFirstOnceEnoughAreComplete) {
  BatchAssembler a("solver", 2, 2, 4);
  addGroup(a, 1, 0);
  a.ingest(member(2, 0, 0));  // group 2 incomplete
  EXPECT_FALSE(a.serve(0, 0));
  a.ingest(member(2, 1, 0));
  addGroup(a, 3, 0);
  auto batch = a.serve(0, 7);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->batch_id, 7u);
  EXPECT_EQ(batch->trainer_version, 0);
  ASSERT_EQ(batch->trajectories.size(), 4u);
  EXPECT_EQ(batch->trajectories[0].group_id, 1u);
  EXPECT_EQ(batch->trajectories[1].group_id, 1u);
  EXPECT_EQ(batch->trajectories[2].group_id, 2u);
  EXPECT_EQ(a.buffered(), 2u);  // group 3 waits
  EXPECT_EQ(a.counters().consumed, 4u);
  expectConservation(a);
}

TEST(BatchAssembler, DropsGroupsOlderThanTheBoundAndCountsThem) {
  BatchAssembler a("solver", 2, 1, 2);  // η = 2
  addGroup(a, 1, 0);                    // staleness 3 at version 3: dropped
  addGroup(a, 2, 1);                    // staleness 2: usable
  auto batch = a.serve(3, 0);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->trajectories.front().group_id, 2u);
  EXPECT_EQ(a.counters().stale_dropped, 2u);
  for (const auto& t : batch->trajectories) EXPECT_LE(batch->trainer_version - t.weight_version_min, 2);
  expectConservation(a);
}

TEST(BatchAssembler, AGroupIsAsOldAsItsOldestMember) {
  BatchAssembler a("solver", 2, 1, 1);
  a.ingest(member(1, 0, 5));
  a.ingest(member(1, 1, 3));  // staleness 2 at version 5
  EXPECT_FALSE(a.serve(5, 0));
  EXPECT_EQ(a.counters().stale_dropped, 2u);
}

TEST(BatchAssembler, FiltersNonFiniteAndErrorMembersButCompletesTheirGroup) {
  BatchAssembler a("solver", 3, 1, 4);
  a.ingest(member(1, 0, 0));
  a.ingest(member(1, 1, 0, std::numeric_limits<double>::quiet_NaN()));
  auto error = member(1, 2, 0);
  error.status = static_cast<std::uint8_t>(TrajectoryStatus::Error);
  a.ingest(error);
  auto batch = a.serve(0, 0);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->trajectories.size(), 1u);
  EXPECT_EQ(a.counters().filtered, 2u);
  EXPECT_EQ(a.counters().filtered_nonfinite, 1u);
  EXPECT_EQ(a.counters().filtered_error, 1u);
  expectConservation(a);
}

TEST(BatchAssembler, AdmissionRoomFollowsTheCapacityRule) {
  BatchAssembler a("solver", 2, 2, 1);  // B = 4, η = 1
  EXPECT_EQ(a.admissionRoom(0, 0), 8);  // (η + 0 + 1)·B
  EXPECT_EQ(a.admissionRoom(0, 6), 2);
  addGroup(a, 1, 0);
  EXPECT_EQ(a.admissionRoom(0, 0), 6);  // buffered counts
  addGroup(a, 2, 0);
  ASSERT_TRUE(a.serve(0, 0));
  EXPECT_EQ(a.admissionRoom(0, 0), 4);  // consumed 4 at version 0: one batch ahead only
  EXPECT_EQ(a.admissionRoom(1, 0), 8);
  EXPECT_EQ(a.admissionRoom(0, 100), 0);  // never negative
}

TEST(BatchAssembler, RestoreKeepsCountersAndHeldGroups) {
  BatchAssembler a("solver", 2, 1, 4);
  addGroup(a, 1, 0);
  ASSERT_TRUE(a.serve(0, 0));
  addGroup(a, 2, 1);
  a.ingest(member(3, 0, 1));  // incomplete when the checkpoint is taken
  BatchAssembler b("solver", 2, 1, 4);
  b.restore(a.counters(), a.heldTrajectories());
  EXPECT_EQ(b.buffered(), 3u);
  EXPECT_EQ(b.counters().consumed, 2u);
  expectConservation(b);
  auto first = b.serve(1, 1);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->trajectories.front().group_id, 3u);  // held incomplete groups come first
  auto second = b.serve(1, 2);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->trajectories.size(), 2u);
  EXPECT_EQ(b.buffered(), 0u);
  expectConservation(b);
}

}  // namespace
}  // namespace astraflow
