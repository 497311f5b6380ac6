// WeightStore at 2-4 ranks (osc sm and ucx): rank 0 hosts, rank 1 is the trainer staging
// versions 1..N of changing sizes, the other ranks (and the trainer) pull concurrently. Every
// pulled version is byte-exact for its number (a torn read is never returned), versions seen
// by a reader never go back, and the last version reaches everyone.
#include <gtest/gtest.h>

#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/weights/weight_store.hpp"

using namespace astraflow;

namespace {

constexpr std::int64_t kVersions = 40;
constexpr std::uint64_t kCapacity = 1 << 20;

std::vector<std::byte> weightsOf(std::int64_t version) {
  // Sizes change with the version; content is a function of (version, index).
  std::vector<std::byte> w(kCapacity / 2 + static_cast<std::uint64_t>(version) * 4099);
  std::uint32_t x = static_cast<std::uint32_t>(version) * 2654435761u;
  for (auto& b : w) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return w;
}

}  // namespace

TEST(WeightStore, ConcurrentPullsAreNeverTorn) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 2) GTEST_SKIP() << "needs a host and a trainer";
  WeightStore store(comm, 0, kCapacity, "solver");
  std::vector<std::byte> got;
  EXPECT_EQ(store.publishedVersion(), -1);
  if (comm.rank() != 0) EXPECT_EQ(store.pull(got), -1);
  comm.barrier();

  MPI_Request done_req = MPI_REQUEST_NULL;
  int done = 0;
  if (comm.rank() == 0) {
    // Host: publish whatever is staged until the last version is out, then keep MPI
    // progressing until every reader has seen it.
    std::int64_t last = 0;
    Backoff backoff(std::chrono::microseconds(50), 64);
    while (last < kVersions) {
      const auto v = store.publishStaged();
      if (v > 0) {
        EXPECT_GT(v, last) << "published versions must increase";
        last = v;
        backoff.reset();
      } else {
        store.progress();
        backoff.wait();
      }
    }
    MPI_Ibarrier(comm.raw(), &done_req);
    while (!done) {
      MPI_Test(&done_req, &done, MPI_STATUS_IGNORE);
      backoff.wait();
    }
    EXPECT_EQ(store.stats().published, static_cast<std::uint64_t>(kVersions));
  } else {
    std::int64_t seen = 0;
    std::uint64_t checked = 0;
    for (std::int64_t v = 1; seen < kVersions;) {
      if (comm.rank() == 1 && v <= kVersions) {
        store.stage(v, weightsOf(v));
        ++v;
      }
      if (store.publishedVersion() > seen) {
        const auto version = store.pull(got);
        ASSERT_GE(version, seen) << "a reader saw versions go back";
        ASSERT_EQ(got, weightsOf(version)) << "pulled bytes differ from version " << version;
        seen = version;
        ++checked;
      }
    }
    EXPECT_EQ(seen, kVersions);
    EXPECT_GT(checked, 0u);
    if (comm.rank() == 1) {
      std::vector<std::byte> too_big(kCapacity + 1);
      EXPECT_THROW(store.stage(kVersions + 1, too_big), Error);
    }
    MPI_Ibarrier(comm.raw(), &done_req);
    MPI_Wait(&done_req, MPI_STATUS_IGNORE);
  }
  comm.barrier();
}
