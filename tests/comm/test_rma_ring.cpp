// RmaRing at 1, 2 and 4 ranks (under osc sm and osc ucx, see tests/CMakeLists.txt):
// many producers into one host consumer, one host producer into many remote consumers;
// every record arrives exactly once, byte-identical, in per-producer order, through a ring
// far smaller than the traffic; an over-large record is refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/rma_ring.hpp"

using namespace astraflow;
using namespace std::chrono_literals;

namespace {

constexpr int kHost = 0;
constexpr std::uint32_t kStop = 0xffffffffu;

// Record: [producer u32][index u32][bytes derived from both]. Size varies from 8 bytes to
// several slots so records span slot boundaries and the ring's wrap-around.
std::vector<std::byte> makeRecord(std::uint32_t producer, std::uint32_t index, std::size_t max_bytes) {
  std::mt19937 rng(producer * 7919u + index);
  const std::size_t size = 8 + rng() % (max_bytes - 7);
  std::vector<std::byte> r(size);
  std::memcpy(r.data(), &producer, 4);
  std::memcpy(r.data() + 4, &index, 4);
  for (std::size_t i = 8; i < size; ++i) r[i] = static_cast<std::byte>(rng() & 0xff);
  return r;
}

std::pair<std::uint32_t, std::uint32_t> idOf(const std::vector<std::byte>& r) {
  std::uint32_t p = 0, i = 0;
  std::memcpy(&p, r.data(), 4);
  std::memcpy(&i, r.data() + 4, 4);
  return {p, i};
}

struct World {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  int rank = comm.rank();
  int size = comm.size();
};

}  // namespace

// 3 producers x 2,000 records at 4 ranks (n-1 producers in general) into the host.
TEST(RmaRing, ManyProducersOneHostConsumerExactlyOnceInOrder) {
  World w;
  constexpr std::uint32_t kPerProducer = 2000;
  constexpr std::size_t kMaxRecord = 200;  // up to 4 slots of 64 bytes
  // 16 slots x 64 bytes = 1 KiB ring for ~600 KB of traffic: producers must wait.
  RmaRing ring(w.comm, kHost, RingGeometry{16, 64}, RmaRing::Consumer::Host, "test-traj");

  const int producers = w.size == 1 ? 1 : w.size - 1;
  std::uint64_t refused = 0;
  if (w.rank == kHost) {
    std::map<std::uint32_t, std::uint32_t> next;  // producer -> next expected index
    std::uint32_t local_pushed = 0;
    std::uint64_t received = 0;
    std::vector<std::byte> got;
    const std::uint64_t total = std::uint64_t(producers) * kPerProducer;
    if (w.size > 1) {
      // Let the producers fill the ring before draining it. tryPush never claims a slot that
      // is not free, so a ticket beyond the last slot means some producer was refused and
      // went on to wait in push().
      Backoff backoff;
      while (ring.ticketsClaimed() <= ring.geometry().slots) {
        ring.progress();
        backoff.wait();
      }
    }
    while (received < total) {
      // At 1 rank the host produces too: it can only offer what fits right now.
      if (w.size == 1 && local_pushed < kPerProducer) {
        if (ring.tryPush(makeRecord(0, local_pushed, kMaxRecord))) ++local_pushed;
      }
      if (!ring.pop(got, 10s)) FAIL() << "no record for 10 s after " << received;
      auto [p, i] = idOf(got);
      ASSERT_EQ(i, next[p]) << "producer " << p << " out of order";
      ASSERT_EQ(got, makeRecord(p, i, kMaxRecord)) << "record " << p << ":" << i << " differs";
      next[p] = i + 1;
      ++received;
    }
    EXPECT_EQ(received, total);
    for (auto& [p, n] : next) EXPECT_EQ(n, kPerProducer) << "producer " << p;
    std::vector<std::byte> extra;
    EXPECT_FALSE(ring.tryPop(extra)) << "a record arrived twice or from nowhere";
  } else {
    for (std::uint32_t i = 0; i < kPerProducer; ++i) {
      const auto record = makeRecord(w.rank, i, kMaxRecord);
      if (!ring.tryPush(record)) {
        ++refused;
        ring.push(record);  // waits for space; never drops
      }
    }
    EXPECT_EQ(ring.stats().records_pushed, kPerProducer);
  }
  // The ring was full while the host held back: some producer was refused and waited.
  std::uint64_t all_refused = 0;
  MPI_Allreduce(&refused, &all_refused, 1, MPI_UINT64_T, MPI_SUM, w.comm.raw());
  if (w.size > 1) {
    EXPECT_GT(all_refused, 0u) << "a 1 KiB ring took ~600 KB without ever being full";
  }
  w.comm.barrier();
}

// The host produces; every other rank consumes (tasks, batches). Each record reaches exactly
// one consumer, and each consumer sees increasing indices.
TEST(RmaRing, HostProducerManyRemoteConsumersExactlyOnce) {
  World w;
  constexpr std::uint32_t kRecords = 3000;
  constexpr std::size_t kMaxRecord = 300;
  RmaRing ring(w.comm, kHost, RingGeometry{8, 128}, RmaRing::Consumer::Remote, "test-task");
  const int consumers = w.size == 1 ? 1 : w.size - 1;

  std::vector<std::uint32_t> mine;
  if (w.rank == kHost) {
    std::vector<std::byte> got;
    std::uint32_t i = 0;
    int stops = 0;
    while (i < kRecords + consumers) {
      const auto rec = i < kRecords ? makeRecord(0, i, kMaxRecord) : makeRecord(kStop, 0, 16);
      if (w.size == 1) {
        if (ring.tryPush(rec)) ++i;
        while (ring.tryPop(got)) {
          auto [p, idx] = idOf(got);
          if (p == kStop) {
            ++stops;
            continue;
          }
          ASSERT_EQ(got, makeRecord(p, idx, kMaxRecord));
          mine.push_back(idx);
        }
      } else {
        ring.push(rec);
        ++i;
      }
    }
    if (w.size == 1) {
      EXPECT_EQ(stops, 1);
    }
  } else {
    std::vector<std::byte> got;
    while (true) {
      if (!ring.pop(got, 10s)) FAIL() << "consumer starved: " << ring.describeState();
      auto [p, idx] = idOf(got);
      if (p == kStop) break;
      ASSERT_EQ(got, makeRecord(p, idx, kMaxRecord)) << "record " << idx << " differs";
      if (!mine.empty()) {
        ASSERT_GT(idx, mine.back()) << "consumer saw indices out of order";
      }
      mine.push_back(idx);
    }
  }

  // Gather every consumer's indices at rank 0: the union is 0..kRecords-1, no duplicates.
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(w.size);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, w.comm.raw());
  std::vector<int> displs(w.size, 0);
  int total = 0;
  for (int r = 0; r < w.size; ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<std::uint32_t> all(w.rank == 0 ? total : 0);
  MPI_Gatherv(mine.data(), count, MPI_UINT32_T, all.data(), counts.data(), displs.data(), MPI_UINT32_T, 0,
              w.comm.raw());
  if (w.rank == 0) {
    EXPECT_EQ(total, static_cast<int>(kRecords));
    std::set<std::uint32_t> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), kRecords) << "a record was delivered twice";
    EXPECT_EQ(*unique.begin(), 0u);
    EXPECT_EQ(*unique.rbegin(), kRecords - 1);
  }
  w.comm.barrier();
}

TEST(RmaRing, OverLargeRecordIsRefusedNotHung) {
  World w;
  RmaRing ring(w.comm, kHost, RingGeometry{4, 32}, RmaRing::Consumer::Host, "test-small");
  EXPECT_EQ(ring.maxRecordBytes(), 4u * 32u - 8u);
  std::vector<std::byte> big(ring.maxRecordBytes() + 1);
  EXPECT_THROW(ring.push(big), RecordTooLarge);
  EXPECT_THROW(ring.tryPush(big), RecordTooLarge);
  try {
    ring.push(big);
  } catch (const RecordTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("test-small"), std::string::npos) << e.what();
  }
  w.comm.barrier();
  // Nothing was claimed: the largest legal record still goes through (one producer at a time).
  std::vector<std::byte> max(ring.maxRecordBytes(), std::byte{0x5a});
  if (w.rank == w.size - 1) {
    if (w.rank == kHost) {
      ASSERT_TRUE(ring.tryPush(max));
    } else {
      ring.push(max);
    }
  }
  if (w.rank == kHost) {
    std::vector<std::byte> got;
    ASSERT_TRUE(ring.pop(got, 10s));
    EXPECT_EQ(got, max);
  }
  w.comm.barrier();
}

TEST(RmaRing, ImpossibleWindowFailsOnEveryRank) {
  World w;
  // 2^24 slots x 2^30 bytes: far beyond any node. Every rank must get the error, none hang.
  EXPECT_THROW(RmaRing(w.comm, kHost, RingGeometry{1u << 24, 1u << 30}, RmaRing::Consumer::Host, "huge"),
               WindowAllocationError);
  w.comm.barrier();
}
