// Comm's and Win's typed operations (the ones the other modules use instead of raw MPI): each
// checked against what every rank can compute for itself, at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/win.hpp"

using namespace astraflow;

namespace {

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + static_cast<std::size_t>(seed)) % 251);
  return out;
}

}  // namespace

TEST(CommOps, BroadcastsFromAnyRoot) {
  const Comm world = Comm::duplicate(MPI_COMM_WORLD);
  const int me = world.rank(), root = world.size() - 1;
  EXPECT_EQ(world.broadcastValue(root, me == root ? std::int64_t{-42} : std::int64_t{7}), -42);
  EXPECT_EQ(world.broadcastValue(root, me == root ? 2.5 : -1.0), 2.5);
  EXPECT_EQ(world.broadcastValue(root, me == root), true);
  std::array<char, 16> host{};
  if (me == root) std::strcpy(host.data(), "node-17");
  EXPECT_STREQ(world.broadcastValue(root, host).data(), "node-17");
  // Bytes of any length: 3 MB, then none.
  const auto sent = pattern(3'000'017, 5);
  EXPECT_EQ(world.broadcastBytes(root, me == root ? sent : std::vector<std::byte>(11)), sent);
  EXPECT_TRUE(world.broadcastBytes(root, {}).empty());
}

TEST(CommOps, ReductionsAndScans) {
  const Comm world = Comm::duplicate(MPI_COMM_WORLD);
  const int me = world.rank(), size = world.size();
  EXPECT_EQ(world.allreduceMax(std::int64_t{me * 7 - 3}), std::int64_t{(size - 1) * 7 - 3});
  EXPECT_EQ(world.allreduceMax(std::uint64_t{1000} - static_cast<std::uint64_t>(me)), 1000u);
  std::vector<std::int64_t> values{me, -me, me % 2 == 0 ? 100 : 5};
  world.allreduceMax(values);
  EXPECT_EQ(values, (std::vector<std::int64_t>{size - 1, 0, 100}));
  // 1 + 2 + ... + me: the ranks before this one, each giving rank + 1.
  EXPECT_EQ(world.exclusiveSum(me + 1), me * (me + 1) / 2);
}

TEST(CommOps, OneMachineIsOneNode) {
  const Comm world = Comm::duplicate(MPI_COMM_WORLD);
  const Comm node = world.splitByNode();
  EXPECT_EQ(node.size(), world.size());
  EXPECT_EQ(node.rank(), world.rank());  // ordered by world rank
}

TEST(CommOps, WindowGetAndPutMoveEveryRanksBytes) {
  const Comm world = Comm::duplicate(MPI_COMM_WORLD);
  const int me = world.rank(), size = world.size();
  constexpr std::size_t kSlot = 100'003;  // odd: no alignment to lean on
  Win win = Win::allocate(world, me == 0 ? kSlot * static_cast<std::size_t>(size) : 0, "test");
  win.lockAll();
  const auto mine = pattern(kSlot, me);
  win.put(0, kSlot * static_cast<std::size_t>(me), mine.data(), mine.size());
  win.flush(0);
  world.barrier();
  for (int r = 0; r < size; ++r) {
    std::vector<std::byte> got(kSlot);
    win.get(0, kSlot * static_cast<std::size_t>(r), got.data(), got.size());
    win.flush(0);
    EXPECT_EQ(got, pattern(kSlot, r)) << "slot of rank " << r;
  }
  world.barrier();
  win.unlockAll();
}
