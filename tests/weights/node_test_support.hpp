#pragma once
// What the node-copy tests share: the test model's versions, pretend nodes for one test, and a
// barrier during which the store's host keeps serving gets.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "sparse_versions.hpp"

namespace astraflow::test_support {

constexpr std::uint64_t kNodeCapacity = 1 << 19;

inline std::vector<std::byte> nodeVersion(std::int64_t v) { return sparseVersion(v, kNodeCapacity / 2); }

inline bool equalsNodeVersion(std::span<const std::byte> bytes, std::int64_t v) {
  const auto want = nodeVersion(v);
  return bytes.size() == want.size() && std::memcmp(bytes.data(), want.data(), want.size()) == 0;
}

// ASTRAFLOW_NODE_RANKS for one test.
class PretendNodes {
 public:
  explicit PretendNodes(const char* k) {
    if (k)
      ::setenv("ASTRAFLOW_NODE_RANKS", k, 1);
    else
      ::unsetenv("ASTRAFLOW_NODE_RANKS");
  }
  ~PretendNodes() { ::unsetenv("ASTRAFLOW_NODE_RANKS"); }
};

inline void waitAll(const Comm& comm, WeightStore& store) {
  // The host serves gets while it waits for the others (a blocking barrier would starve them).
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm.raw(), &req);
  int done = 0;
  Backoff backoff(std::chrono::microseconds(50), 64);
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (store.isHost()) store.progress();
    if (!done) backoff.wait();
  }
}

// Rank 1 (the trainer) stages version v, rank 0 (the store's host) publishes it; every rank of
// `comm` returns once it is out.
inline void publishNodeVersion(const Comm& comm, WeightStore& store, std::int64_t v) {
  if (comm.rank() == 1) store.stage(v, nodeVersion(v));
  waitAll(comm, store);
  if (comm.rank() == 0) {
    EXPECT_EQ(store.publishStaged(), v);
  }
  waitAll(comm, store);
}

}  // namespace astraflow::test_support
