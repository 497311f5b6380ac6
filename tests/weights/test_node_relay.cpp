// Versions relayed between nodes (NodeRelay, docs/weights.md "Relayed between nodes") at 4
// and 6 ranks: rank 0 hosts the store, rank 1 stages versions, each rollout rank is a pretend
// node of its own (ASTRAFLOW_NODE_RANKS=1), so node i is rank i + 2. The store serves a full
// version to the first node that asks while no ancestor has it; every node below takes it from
// its nearest ancestor that has it, byte-exact, and the store sends it nothing. An ancestor
// that is behind and idle is passed over; the tree's shape (fanout 2) or a chain (fanout 1)
// decides which node is asked. In delta mode the deltas go the same way.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "astraflow/comm/comm.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "node_test_support.hpp"

using namespace astraflow;
using test_support::equalsNodeVersion;
using test_support::kNodeCapacity;
using test_support::nodeVersion;
using test_support::PretendNodes;
using test_support::waitAll;

namespace {

class NodeRelayTest : public ::testing::TestWithParam<int> {};

TEST_P(NodeRelayTest, FullVersionsComeFromTheNearestAncestorThatHasThem) {
  const int fanout = GetParam();
  PretendNodes pretend("1");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 4) GTEST_SKIP() << "needs two rollout ranks (two nodes) beside the host and the trainer";
  const int nodes = comm.size() - 2;
  WeightStore store(comm, 0, kNodeCapacity, "solver", {.delta = false});
  NodeWeights node(comm, comm.rank() >= 2, kNodeCapacity, "solver", {.fanout = fanout, .patience_s = 5});
  const int me = comm.rank() - 2;  // this rank's node, for the rollout ranks
  if (me >= 0) {
    EXPECT_EQ(node.nodeIndex(), me);
    EXPECT_EQ(node.nodes(), nodes);
  }
  auto publish = [&](std::int64_t v) { test_support::publishNodeVersion(comm, store, v); };
  // Node `n` refreshes to `v` while the others wait; says whether the store sent it the version.
  auto refresh = [&](int n, std::int64_t v, bool from_store) {
    if (me == n) {
      const auto full_before = store.stats().full_pulls;
      const auto relayed_before = node.relayStats().relayed;
      const NodeVersion got = node.refresh(store, v);
      EXPECT_EQ(got.version, v) << "node " << n;
      EXPECT_TRUE(equalsNodeVersion(got.bytes, v)) << "node " << n << " holds other bytes than v" << v;
      EXPECT_EQ(store.stats().full_pulls - full_before, from_store ? 1u : 0u) << "node " << n;
      EXPECT_EQ(node.relayStats().relayed - relayed_before, from_store ? 0u : 1u) << "node " << n;
    }
    waitAll(comm, store);
  };

  // Version 1 top down: the root from the store, everyone else relayed.
  publish(1);
  for (int n = 0; n < nodes; ++n) refresh(n, 1, /*from_store=*/n == 0);
  if (me > 0) {
    EXPECT_EQ(store.stats().bytes_pulled, 0u) << "a relayed node reads nothing from the store";
    EXPECT_EQ(node.relayStats().bytes, kNodeCapacity);
  }

  // Version 2 bottom up: the last node's ancestors all hold v1 and are not writing: the store.
  publish(2);
  refresh(nodes - 1, 2, /*from_store=*/true);
  if (nodes >= 4) {
    // Node 2 from the store (nodes 0 and 1 are behind); then node 3 relays from node 2 only in
    // a chain (its parent there). In the tree its ancestors are nodes 1 and 0, both behind.
    publish(3);
    refresh(2, 3, /*from_store=*/true);
    refresh(3, 3, /*from_store=*/fanout != 1);
    // v4 reaches nodes 0 and 1 only; node 3 then takes it from the nearest ancestor that has it,
    // node 1, never the root: in a chain its grandparent, past node 2 (behind, idle); in the
    // tree its parent.
    publish(4);
    refresh(0, 4, /*from_store=*/true);
    refresh(1, 4, /*from_store=*/false);
    const auto further_before = node.relayStats().further_up;
    refresh(3, 4, /*from_store=*/false);
    if (me == 3) {
      EXPECT_EQ(node.relayStats().last_source, 1);
      EXPECT_EQ(node.relayStats().further_up - further_before, fanout == 1 ? 1u : 0u);
    }
  }
  // Nobody waited: no ancestor was writing when it was asked.
  if (me >= 0) {
    EXPECT_EQ(node.relayStats().waits, 0u);
    EXPECT_EQ(node.relayStats().timeouts, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fanout, NodeRelayTest, ::testing::Values(2, 1));

// Delta mode: a node that is due deltas takes them from the nearest ancestor whose ring holds
// them all — the deltas that ancestor applied, byte for byte the store's — and reads nothing
// from the store; an ancestor that is behind and idle is passed over, and the store serves.
TEST_P(NodeRelayTest, DeltasComeFromTheNearestAncestorThatAppliedThem) {
  const int fanout = GetParam();
  PretendNodes pretend("1");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 4) GTEST_SKIP() << "needs two rollout ranks (two nodes) beside the host and the trainer";
  const int nodes = comm.size() - 2;
  WeightStore store(comm, 0, kNodeCapacity, "solver", {.delta = true, .delta_log = 8, .full_sync_every = 16});
  NodeWeights node(comm, comm.rank() >= 2, kNodeCapacity, "solver",
                   {.fanout = fanout, .patience_s = 5, .delta_ring = kNodeCapacity / 4});
  const int me = comm.rank() - 2;
  auto publish = [&](std::int64_t v) { test_support::publishNodeVersion(comm, store, v); };
  // Node `n` refreshes to `v` by `deltas` deltas while the others wait; says whether the store
  // sent them.
  auto refresh = [&](int n, std::int64_t v, std::uint64_t deltas, bool from_store) {
    if (me == n) {
      const auto bytes_before = store.stats().bytes_pulled, applied_before = store.stats().deltas_applied;
      const auto relayed_before = node.relayStats().deltas, full_before = store.stats().full_pulls;
      const NodeVersion got = node.refresh(store, v);
      EXPECT_EQ(got.version, v) << "node " << n;
      EXPECT_TRUE(equalsNodeVersion(got.bytes, v)) << "node " << n << " holds other bytes than v" << v;
      EXPECT_EQ(store.stats().deltas_applied - applied_before, deltas) << "node " << n;
      EXPECT_EQ(store.stats().full_pulls, full_before) << "node " << n << ": only its first version in full";
      EXPECT_EQ(node.relayStats().deltas - relayed_before, from_store ? 0u : deltas) << "node " << n;
      // Top down, every ancestor holds them: the parent serves.
      if (!from_store) EXPECT_EQ(node.relayStats().last_source, (n - 1) / fanout) << "node " << n;
      EXPECT_EQ(node.relayStats().further_up, 0u) << "node " << n;
      if (from_store)
        EXPECT_GT(store.stats().bytes_pulled, bytes_before) << "node " << n;
      else
        EXPECT_EQ(store.stats().bytes_pulled, bytes_before) << "node " << n << " read the store";
    }
    waitAll(comm, store);
  };
  // Version 1 in full: the root from the store, the others by the full-version relay (tested
  // above).
  publish(1);
  for (int n = 0; n < nodes; ++n) {
    if (me == n) node.refresh(store, 1);
    waitAll(comm, store);
  }
  std::uint64_t full_relayed = node.relayStats().relayed;
  // Version 2 top down: the root by a delta from the store, every other node by its ancestor's.
  publish(2);
  for (int n = 0; n < nodes; ++n) refresh(n, 2, 1, /*from_store=*/n == 0);
  // Versions 3 and 4 top down: two deltas each, relayed below the root.
  publish(3);
  publish(4);
  for (int n = 0; n < nodes; ++n) refresh(n, 4, 2, /*from_store=*/n == 0);
  // Version 5 bottom up: the last node's ancestors hold v4 and are not writing: the store.
  publish(5);
  refresh(nodes - 1, 5, 1, /*from_store=*/true);
  if (me >= 0) {
    EXPECT_EQ(node.relayStats().relayed, full_relayed) << "no full version after the first";
    EXPECT_EQ(node.relayStats().waits, 0u);
    EXPECT_EQ(node.relayStats().timeouts, 0u);
    EXPECT_EQ(store.stats().deltas_rejected, 0u);
  }
}

// A node of two slots (two ranks here) whose ring keeps the deltas it applies: the spare slot,
// one version behind the current one, takes the older of its two deltas from the node's own
// ring (the current slot applied it) and only the newest from the store.
TEST(NodeRelay, ASlotTakesTheDeltaItsNodeKeptAlready) {
  PretendNodes pretend("2");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 6) GTEST_SKIP() << "needs two nodes of two rollout ranks (one with a child) beside the host";
  WeightStore store(comm, 0, kNodeCapacity, "solver", {.delta = true, .delta_log = 8, .full_sync_every = 16});
  NodeWeights node(comm, comm.rank() >= 2, kNodeCapacity, "solver",
                   {.fanout = 1, .patience_s = 5, .delta_ring = kNodeCapacity / 4});
  auto publish = [&](std::int64_t v) { test_support::publishNodeVersion(comm, store, v); };
  // The root node's two ranks take turns, each writing the slot the other does not use.
  auto refresh = [&](int rank, std::int64_t v, std::uint64_t kept) {
    if (comm.rank() == rank) {
      const auto kept_before = store.stats().deltas_kept, applied_before = store.stats().deltas_applied;
      const auto full_before = store.stats().full_pulls;
      const NodeVersion got = node.refresh(store, v);
      EXPECT_EQ(got.version, v);
      EXPECT_TRUE(equalsNodeVersion(got.bytes, v)) << "rank " << rank << " holds other bytes than v" << v;
      EXPECT_EQ(store.stats().full_pulls, full_before) << "v" << v << " by deltas";
      EXPECT_EQ(store.stats().deltas_applied - applied_before, 2u) << "v" << v << ": the spare slot is two behind";
      EXPECT_EQ(store.stats().deltas_kept - kept_before, kept) << "v" << v;
    }
    waitAll(comm, store);
  };
  auto full = [&](int rank, std::int64_t v) {
    if (comm.rank() == rank) EXPECT_TRUE(equalsNodeVersion(node.refresh(store, v).bytes, v));
    waitAll(comm, store);
  };
  publish(1);
  full(2, 1);  // slot 0
  publish(2);
  full(3, 2);  // slot 1, empty until now: in full
  publish(3);
  refresh(2, 3, 0);  // slot 0, v1: deltas 2 and 3 from the store (slot 1 took v2 whole), both kept
  publish(4);
  refresh(3, 4, 1);  // slot 1, v2: delta 3 kept by slot 0's update, delta 4 from the store
  publish(5);
  refresh(2, 5, 1);  // slot 0, v3: delta 4 kept, delta 5 from the store
  if (comm.rank() >= 2) EXPECT_EQ(store.stats().deltas_rejected, 0u);
}

// An ancestor whose rank is inside a long call that makes no MPI call: where the transport needs
// it to answer reads (UCX without cross-process reads, as in a container), the child gives the
// read up after answer_s and takes the version from the store instead of waiting for the call
// to end; where the read is one-sided it relays at once. Either way the child holds the version
// long before the ancestor's call ends.
TEST(NodeRelay, AnAncestorInsideALongCallDoesNotHoldItsChildBack) {
  PretendNodes pretend("1");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 4) GTEST_SKIP() << "needs two rollout ranks (two nodes) beside the host and the trainer";
  WeightStore store(comm, 0, kNodeCapacity, "solver", {.delta = false});
  NodeWeights node(comm, comm.rank() >= 2, kNodeCapacity, "solver", {.fanout = 2, .patience_s = 5, .answer_s = 0.3});
  test_support::publishNodeVersion(comm, store, 1);
  if (comm.rank() == 2) {
    EXPECT_TRUE(equalsNodeVersion(node.refresh(store, 1).bytes, 1));
  }
  waitAll(comm, store);
  constexpr auto kLongCall = std::chrono::seconds(3);
  if (comm.rank() == 2) {
    std::this_thread::sleep_for(kLongCall);  // generating, no MPI call
  } else if (comm.rank() == 3) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(equalsNodeVersion(node.refresh(store, 1).bytes, 1));
    EXPECT_LT(std::chrono::steady_clock::now() - start, kLongCall / 2) << "the child waited for its ancestor's call";
    const auto relayed = node.relayStats().relayed, from_store = store.stats().full_pulls;
    EXPECT_EQ(relayed + from_store, 1u);
    EXPECT_EQ(node.relayStats().unanswered, from_store) << "it went to the store only for an unanswered read";
  }
  waitAll(comm, store);
}

// weights.relay_fanout 0: every node pulls from the store, as before the relay.
TEST(NodeRelay, FanoutZeroPullsEveryNodeFromTheStore) {
  PretendNodes pretend("1");
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 4) GTEST_SKIP() << "needs two rollout ranks (two nodes) beside the host and the trainer";
  WeightStore store(comm, 0, kNodeCapacity, "solver", {.delta = false});
  NodeWeights node(comm, comm.rank() >= 2, kNodeCapacity, "solver", {.fanout = 0});
  test_support::publishNodeVersion(comm, store, 1);
  for (int n = 0; n < comm.size() - 2; ++n) {
    if (comm.rank() == n + 2) {
      EXPECT_TRUE(equalsNodeVersion(node.refresh(store, 1).bytes, 1));
      EXPECT_EQ(store.stats().full_pulls, 1u);
      EXPECT_EQ(node.relayStats().relayed, 0u);
    }
    waitAll(comm, store);
  }
}

}  // namespace
