// WeightStore at 2-4 ranks (osc sm and ucx): rank 0 hosts, rank 1 is the trainer staging
// versions, the other ranks (and the trainer) pull. Full and delta mode: every pulled version
// is byte-exact for its number (a torn read is never returned), versions never go back, the
// last version reaches everyone; in delta mode readers move by deltas, fall back to a full
// version when behind the log or after full_sync_every deltas, and a corrupted logged delta is
// rejected, counted and answered by a full pull.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/weights/delta_codec.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "sparse_versions.hpp"

using namespace astraflow;

namespace {

constexpr std::int64_t kVersions = 40;
constexpr std::uint64_t kCapacity = 1 << 20;
constexpr std::uint64_t kWords = kCapacity / 4;  // a fixed-size model of 512 KiB

std::vector<std::byte> sparseVersion(std::int64_t v) { return test_support::sparseVersion(v, kWords); }

// Sizes change with the version; every byte differs between versions (no delta pays off).
std::vector<std::byte> denseVersion(std::int64_t version) {
  std::vector<std::byte> w(kCapacity / 2 + static_cast<std::uint64_t>(version) * 4098);
  std::uint32_t x = static_cast<std::uint32_t>(version) * 2654435761u;
  for (auto& b : w) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return w;
}

using VersionFn = std::vector<std::byte> (*)(std::int64_t);

// Host publishes until `last` is out, then progresses until everyone is done. It publishes as the
// dataflow loop does (advancePublish: the encode on the store's worker while readers pull).
void hostLoop(WeightStore& store, std::int64_t last, const Comm& comm) {
  std::int64_t published = 0;
  Backoff backoff(std::chrono::microseconds(50), 64);
  while (published < last) {
    const auto v = store.advancePublish();
    if (v > 0) {
      EXPECT_GT(v, published) << "published versions must increase";
      published = v;
      backoff.reset();
    } else {
      store.progress();
      backoff.wait();
    }
  }
  MPI_Request done_req = MPI_REQUEST_NULL;
  int done = 0;
  MPI_Ibarrier(comm.raw(), &done_req);
  while (!done) {
    MPI_Test(&done_req, &done, MPI_STATUS_IGNORE);
    backoff.wait();
  }
}

void concurrentPulls(WeightStoreOptions options, VersionFn versionOf) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 2) GTEST_SKIP() << "needs a host and a trainer";
  WeightStore store(comm, 0, kCapacity, "solver", options);
  WeightReplica replica;
  EXPECT_EQ(store.publishedVersion(), -1);
  if (comm.rank() != 0) {
    EXPECT_EQ(store.pull(replica).version, -1);
  }
  comm.barrier();
  if (comm.rank() == 0) {
    hostLoop(store, kVersions, comm);
    EXPECT_EQ(store.stats().published, static_cast<std::uint64_t>(kVersions));
  } else {
    std::int64_t seen = 0;
    std::uint64_t checked = 0;
    for (std::int64_t v = 1; seen < kVersions;) {
      if (comm.rank() == 1 && v <= kVersions) {
        store.stage(v, versionOf(v));
        ++v;
      }
      if (store.publishedVersion() > seen) {
        const PullResult r = store.pull(replica);
        ASSERT_GE(r.version, seen) << "a reader saw versions go back";
        ASSERT_TRUE(replica.blob == versionOf(r.version)) << "pulled bytes differ from version " << r.version;
        ASSERT_EQ(replica.hash, weightsHash(replica.blob));
        seen = r.version;
        ++checked;
      }
    }
    EXPECT_EQ(seen, kVersions);
    EXPECT_GT(checked, 0u);
    EXPECT_EQ(store.stats().deltas_rejected, 0u);
    if (comm.rank() == 1) {
      std::vector<std::byte> too_big(kCapacity + 1);
      EXPECT_THROW(store.stage(kVersions + 1, too_big), Error);
    }
    MPI_Request done_req = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm.raw(), &done_req);
    MPI_Wait(&done_req, MPI_STATUS_IGNORE);
  }
  comm.barrier();
}

}  // namespace

TEST(WeightStore, ConcurrentPullsAreNeverTornFullMode) { concurrentPulls({.delta = false}, denseVersion); }

TEST(WeightStore, ConcurrentPullsAreNeverTornDeltaMode) {
  concurrentPulls({.delta = true, .delta_log = 4, .full_sync_every = 6}, sparseVersion);
}

TEST(WeightStore, DenseVersionsSkipTheDeltaLog) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 2) GTEST_SKIP() << "needs a host and a trainer";
  WeightStore store(comm, 0, kCapacity, "solver", {.delta = true});
  WeightReplica replica;
  for (std::int64_t v = 1; v <= 3; ++v) {
    // Same size every time, but every byte new: a delta would be larger than the version.
    std::vector<std::byte> w = denseVersion(v);
    w.resize(kCapacity / 2);
    if (comm.rank() == 1) store.stage(v, w);
    comm.barrier();
    if (comm.rank() == 0) {
      EXPECT_EQ(store.publishStaged(), v);
    }
    comm.barrier();
    if (comm.rank() != 0) {
      const PullResult r = store.pull(replica);
      EXPECT_TRUE(r.full) << "a dense version travels whole";
      EXPECT_TRUE(replica.blob == w);
    }
  }
  if (comm.rank() == 0) {
    EXPECT_EQ(store.stats().deltas_logged, 0u);
    EXPECT_EQ(store.stats().deltas_skipped, 2u);
  }
}

// advancePublish hands the staged version to the store's worker and returns at once: the first
// call publishes nothing, readers keep the previous version until a later call commits the new
// one, and the version they then pull is bit-exact and arrives as the worker's delta.
TEST(WeightStore, AdvancePublishEncodesOnAWorkerWhileReadersKeepThePreviousVersion) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 2) GTEST_SKIP() << "needs a host and a trainer";
  WeightStore store(comm, 0, kCapacity, "solver", {.delta = true, .delta_log = 4, .full_sync_every = 16});
  WeightReplica replica;
  for (std::int64_t v = 1; v <= 3; ++v) {
    if (comm.rank() == 1) store.stage(v, sparseVersion(v));
    comm.barrier();
    if (comm.rank() == 0) {
      EXPECT_EQ(store.advancePublish(), -1) << "the call that starts the encode publishes nothing";
      EXPECT_EQ(store.publishedVersion(), v - 1 == 0 ? -1 : v - 1);
      std::int64_t published = -1;
      Backoff backoff(std::chrono::microseconds(50), 64);
      while ((published = store.advancePublish()) < 0) backoff.wait();
      EXPECT_EQ(published, v);
      EXPECT_EQ(store.publishedVersion(), v);
      if (v > 1) {
        EXPECT_EQ(store.lastDelta().target_version, v);
        EXPECT_GT(store.lastDelta().changed, 0u);
      }
    }
    comm.barrier();
    if (comm.rank() != 0) {
      const PullResult r = store.pull(replica);
      EXPECT_EQ(r.version, v);
      EXPECT_EQ(r.full, v == 1) << "after the first version a reader one behind applies the delta";
      EXPECT_TRUE(replica.blob == sparseVersion(v));
    }
    comm.barrier();
  }
  if (comm.rank() == 0) {
    EXPECT_EQ(store.stats().deltas_logged, 2u);
  }
}

// Trainer and readers in lockstep: after the first full version every pull is one delta,
// except that full_sync_every deltas in a row are followed by a full version; a reader that
// sleeps through more versions than the log holds gets a full version; a delta corrupted in
// the host's log is rejected and the reader still ends on the right weights.
TEST(WeightStore, DeltaReadersFollowTheLogAndResync) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 3) GTEST_SKIP() << "needs a host, a trainer and a reader";
  constexpr int kFullSyncEvery = 5, kLog = 4;
  WeightStore store(comm, 0, kCapacity, "solver",
                    {.delta = true, .delta_log = kLog, .full_sync_every = kFullSyncEvery});
  WeightReplica replica;
  const bool reader = comm.rank() >= 2;
  auto publish = [&](std::int64_t v) {
    if (comm.rank() == 1) store.stage(v, sparseVersion(v));
    comm.barrier();
    if (comm.rank() == 0) {
      EXPECT_EQ(store.publishStaged(), v);
      if (v > 1) {
        EXPECT_GT(store.lastDelta().changed, 0u);
        EXPECT_LT(store.lastDelta().density(), 0.03);
      }
    }
    comm.barrier();
  };
  auto pullAndCheck = [&](std::int64_t v) {
    const PullResult r = store.pull(replica);
    EXPECT_EQ(r.version, v);
    EXPECT_TRUE(replica.blob == sparseVersion(v)) << "replica differs from version " << v;
    return r;
  };
  std::int64_t v = 0;
  // 1..13 in lockstep: full at 1, deltas 2..6, full at 7, deltas 8..12, full at 13.
  for (++v; v <= 13; ++v) {
    publish(v);
    if (!reader) continue;
    const PullResult r = pullAndCheck(v);
    const bool expect_full = (v - 1) % (kFullSyncEvery + 1) == 0;
    EXPECT_EQ(r.full, expect_full) << "version " << v;
    if (!expect_full) {
      EXPECT_EQ(r.deltas, 1u);
      EXPECT_LT(r.bytes, kCapacity / 2 / 10) << "a 1 % delta is far smaller than the version";
    }
  }
  // Two behind: two deltas in one pull.
  for (int i = 0; i < 2; ++i, ++v) publish(v);
  if (reader) {
    const PullResult r = pullAndCheck(v - 1);
    EXPECT_FALSE(r.full);
    EXPECT_EQ(r.deltas, 2u);
  }
  // Further behind than the log: a full version.
  for (int i = 0; i < kLog + 1; ++i, ++v) publish(v);
  if (reader) {
    EXPECT_TRUE(pullAndCheck(v - 1).full);
  }
  // A corrupted delta in the log: rejected with a logged reason, then a full version.
  publish(v);
  if (comm.rank() == 0) {
    std::span<std::byte> logged = store.loggedDelta(v);
    ASSERT_FALSE(logged.empty());
    logged[logged.size() / 2] ^= std::byte{0x20};
  }
  comm.barrier();
  if (reader) {
    const PullResult r = pullAndCheck(v);
    EXPECT_TRUE(r.full);
    EXPECT_EQ(store.stats().deltas_rejected, 1u);
  }
  comm.barrier();
}
