// NodeWeights at 3-6 ranks, pretend nodes of two rollout ranks (ASTRAFLOW_NODE_RANKS) and the
// real node: rank 0 hosts the store, rank 1 stages versions, the others are rollout ranks that
// share their node's copy. Every version a rank binds is byte-exact for its number and never
// changes while bound; each version is pulled from the store once per node, not once per rank;
// a rank still bound to the spare slot puts the next write off (counted) until it moves; the
// spare is brought forward by deltas from the version it holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/shared_win.hpp"
#include "astraflow/weights/delta_codec.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "node_test_support.hpp"

using namespace astraflow;

namespace {

using test_support::PretendNodes;
using test_support::waitAll;

constexpr std::uint64_t kCapacity = test_support::kNodeCapacity;

std::vector<std::byte> versionOf(std::int64_t v) { return test_support::nodeVersion(v); }

bool equalsVersion(std::span<const std::byte> bytes, std::int64_t v) {
  return test_support::equalsNodeVersion(bytes, v);
}

// Versions 1..last staged by rank 1 as fast as the host takes them; the rollout ranks refresh
// at random moments and check every version they bind while they hold it.
void concurrentVersions(const char* node_ranks, bool delta) {
  PretendNodes pretend(node_ranks);
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 3) GTEST_SKIP() << "needs a host, a trainer and a rollout rank";
  constexpr std::int64_t kLast = 30;
  WeightStore store(comm, 0, kCapacity, "solver", {.delta = delta, .delta_log = 8, .full_sync_every = 16});
  const bool reader = comm.rank() >= 2;
  // Relayed where there are several nodes: full versions, and in delta mode the deltas too.
  NodeWeights node(comm, reader, kCapacity, "solver", {.fanout = 2, .delta_ring = delta ? kCapacity / 4 : 0});
  EXPECT_EQ(node.member(), reader);
  std::uint64_t written = 0, bound = 0;
  if (comm.rank() == 0) {
    Backoff backoff(std::chrono::microseconds(50), 64);
    for (std::int64_t published = 0; published < kLast;) {
      const auto v = store.advancePublish();
      if (v > 0) published = v;
      store.progress();
      backoff.wait();
    }
  } else if (comm.rank() == 1) {
    for (std::int64_t v = 1; v <= kLast; ++v) store.stage(v, versionOf(v));
  } else {
    std::srand(static_cast<unsigned>(comm.rank()));
    std::int64_t seen = -1;
    while (seen < kLast) {
      const NodeVersion v = node.refresh(store, store.publishedVersion());
      if (v.version < 0) continue;
      ASSERT_GE(v.version, seen) << "a rank's versions went back";
      // "Compute" on the bound bytes for a while, then check they never changed under it.
      ASSERT_TRUE(equalsVersion(v.bytes, v.version)) << "bound bytes differ from version " << v.version;
      std::this_thread::sleep_for(std::chrono::microseconds(std::rand() % 3000));
      ASSERT_EQ(weightsHash(v.bytes), v.hash) << "version " << v.version << " changed while bound";
      seen = v.version;
    }
    written = node.stats().versions_written;
    bound = node.stats().versions_bound;
    EXPECT_EQ(store.stats().pulls, written) << "every pull from the store is a version written for the node";
  }
  waitAll(comm, store);
  const Comm readers = comm.split(reader ? 0 : -1, comm.rank());
  if (!reader) return;
  // One copy per node: the node pulled each version it took once, yet each of its ranks bound it.
  const Comm same_node = splitIntoNodes(readers);
  std::uint64_t counts[2] = {written, bound};
  std::uint64_t node_written = 0, node_bound = 0;
  for (int r = 0; r < same_node.size(); ++r) {
    auto c = same_node.broadcastValue(r, std::array<std::uint64_t, 2>{counts[0], counts[1]});
    node_written += c[0];
    node_bound += c[1];
  }
  EXPECT_LE(node_written, static_cast<std::uint64_t>(kLast));
  EXPECT_GE(node_written, 1u);
  if (same_node.size() > 1) {
    EXPECT_GT(node_bound, node_written) << "the ranks of a node must share pulls";
  }
}

}  // namespace

TEST(NodeWeights, PretendNodesOfTwoShareEveryVersionExactlyDeltaMode) { concurrentVersions("2", true); }
TEST(NodeWeights, PretendNodesOfTwoShareEveryVersionExactlyFullMode) { concurrentVersions("2", false); }
TEST(NodeWeights, TheRealNodeSharesEveryVersionExactly) { concurrentVersions(nullptr, true); }
// Every rollout rank a node of its own: full versions (and deltas) relayed down the tree while
// the readers refresh at random moments.
TEST(NodeWeights, PretendNodesOfOneRelayEveryVersionExactly) { concurrentVersions("1", false); }
TEST(NodeWeights, PretendNodesOfOneRelayEveryVersionExactlyDeltaMode) { concurrentVersions("1", true); }

// Two rollout ranks on one node, in lockstep: rank 3 stays bound to version 1 while rank 2
// goes on; the write of version 3 is put off until rank 3 moves, then made by deltas on the
// slot that held version 1.
TEST(NodeWeights, ARankStillOnTheSpareSlotPutsTheNextWriteOff) {
  PretendNodes pretend("2");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() != 4) GTEST_SKIP() << "runs at 4 ranks: host, trainer, two rollout ranks";
  WeightStore store(comm, 0, kCapacity, "solver", {.delta = true, .delta_log = 8, .full_sync_every = 16});
  NodeWeights node(comm, comm.rank() >= 2, kCapacity, "solver");
  auto publish = [&](std::int64_t v) { test_support::publishNodeVersion(comm, store, v); };
  auto step = [&](int rank, auto&& body) {
    if (comm.rank() == rank) body();
    waitAll(comm, store);
  };
  publish(1);
  step(2, [&] { EXPECT_EQ(node.refresh(store, 1).version, 1); });
  step(3, [&] {
    const auto v = node.refresh(store, -1);  // stays bound to version 1 from here
    EXPECT_EQ(v.version, 1);
    EXPECT_TRUE(equalsVersion(v.bytes, 1));
  });
  publish(2);
  step(2, [&] { EXPECT_EQ(node.refresh(store, 2).version, 2); });
  publish(3);
  step(2, [&] {
    EXPECT_EQ(node.refresh(store, 3).version, 2) << "the spare still holds rank 3's version";
    EXPECT_EQ(node.stats().spare_in_use, 1u);
  });
  step(3, [&] {
    const auto v = node.refresh(store, -1);
    EXPECT_EQ(v.version, 2);
    EXPECT_TRUE(equalsVersion(v.bytes, 2));
    EXPECT_EQ(node.stats().versions_written, 0u) << "rank 3 never pulled: its node did";
    EXPECT_EQ(store.stats().pulls, 0u);
  });
  step(2, [&] {
    const auto v = node.refresh(store, 3);
    EXPECT_EQ(v.version, 3);
    EXPECT_TRUE(equalsVersion(v.bytes, 3));
    EXPECT_EQ(node.stats().versions_written, 3u);
    // v1 and v2 into empty slots in full; v3 onto the slot holding v1 by the deltas 2 and 3.
    EXPECT_EQ(store.stats().full_pulls, 2u);
    EXPECT_EQ(store.stats().deltas_applied, 2u);
  });
}

TEST(NodeWeights, PretendNodeRanksMustBeAPositiveNumber) {
  PretendNodes pretend("zero");
  EXPECT_THROW(pretendNodeRanks(), Error);
  ::setenv("ASTRAFLOW_NODE_RANKS", "0", 1);
  EXPECT_THROW(pretendNodeRanks(), Error);
  ::setenv("ASTRAFLOW_NODE_RANKS", "3", 1);
  EXPECT_EQ(pretendNodeRanks(), 3);
}
