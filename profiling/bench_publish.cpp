// bench_publish — how long the dataflow rank's loop is held up while a version is published
// (docs/performance.md, "Publishing off the loop"): the store's blocking publishStaged (checksum,
// delta encode and copy on the caller's thread) against advancePublish (checksum and encode on the
// store's worker, the copy on the caller's) with a one-thread encode, and advancePublish with an
// encode on `threads` threads, side by side in one run.
//
//   mpirun -np 2 --bind-to none build/bin/bench_publish [megabytes=160] [rounds=6] [changed=0.01] [threads=2]
//
// Rank 1 stages versions as a trainer does: round 0 a random full version, then each round moves
// `changed` of the bf16 words by one unit in the last place. Rank 0 publishes each as the loop
// would, calling the publish as often as it can (a pass of the loop), and times every call. Per
// mode: the longest call (the loop's longest stall), the mean time from the staged version being
// seen to it being published, and their ratio across the modes.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/mpi.hpp"
#include "astraflow/weights/weight_store.hpp"

using namespace astraflow;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Figures {
  double longest_call = 0, publish_seconds = 0;
  int rounds = 0;
};

// Waits on a non-blocking barrier; the host keeps the store's window progressing meanwhile.
void barrier(const Comm& comm, WeightStore& store) {
  MPI_Request req;
  MPI_Ibarrier(comm.raw(), &req);
  Backoff backoff(std::chrono::microseconds(1000));
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      if (comm.rank() == 0) store.progress();
      backoff.wait();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MpiEnvironment mpi(&argc, &argv);
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() != 2) {
    if (comm.rank() == 0) std::fprintf(stderr, "bench_publish runs on 2 ranks (host, trainer)\n");
    return 1;
  }
  const double megabytes = argc > 1 ? std::atof(argv[1]) : 160;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 6;
  const double changed = argc > 3 ? std::atof(argv[3]) : 0.01;
  const unsigned threads = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 2;
  const auto bytes = static_cast<std::uint64_t>(megabytes * 1e6) & ~std::uint64_t{7};
  std::vector<std::byte> blob;
  std::mt19937_64 rng(7);
  if (comm.rank() == 1) {
    blob.resize(bytes);
    for (std::uint64_t i = 0; i + 8 <= bytes; i += 8) {
      const std::uint64_t r = rng();
      std::memcpy(blob.data() + i, &r, 8);
    }
  }
  constexpr int kModes = 3;
  Figures figures[kModes];
  const std::string names[kModes] = {"publishStaged, 1 thread", "advancePublish, 1 thread",
                                     "advancePublish, " + std::to_string(threads) + " threads"};
  for (int mode = 0; mode < kModes; ++mode) {
    WeightStore store(comm, 0, bytes, "bench", {.delta = true, .encode_threads = mode == 2 ? threads : 1});
    for (int v = 0; v <= rounds; ++v) {
      if (comm.rank() == 1) {
        if (v > 0) {
          std::uniform_int_distribution<std::uint64_t> word(0, bytes / 2 - 1);
          const auto n = static_cast<std::uint64_t>(changed * static_cast<double>(bytes / 2));
          for (std::uint64_t k = 0; k < n; ++k) {
            auto* w = reinterpret_cast<std::uint16_t*>(blob.data()) + word(rng);
            *w = static_cast<std::uint16_t>(*w ^ 1u);
          }
        }
        store.stage(v, blob);
      }
      barrier(comm, store);
      if (comm.rank() == 0) {
        const double t0 = now();
        double longest = 0;
        Backoff idle(std::chrono::microseconds(1000));  // the loop's nap when a pass found nothing
        for (std::int64_t got = -1; got != v;) {
          const double t = now();
          got = mode == 0 ? store.publishStaged() : store.advancePublish();
          longest = std::max(longest, now() - t);
          if (got != v) {
            store.progress();
            idle.wait();
          }
        }
        if (v > 0) {  // round 0 is a full version with no delta
          auto& f = figures[mode];
          f.longest_call = std::max(f.longest_call, longest);
          f.publish_seconds += now() - t0;
          ++f.rounds;
        }
      }
      barrier(comm, store);
    }
  }
  if (comm.rank() == 0) {
    std::printf("bench_publish: %.1f MB versions, %d delta rounds at %.3f changed\n", bytes / 1e6, rounds, changed);
    std::printf("%-28s %18s %22s\n", "mode", "longest call ms", "mean publish ms");
    for (int mode = 0; mode < kModes; ++mode) {
      const auto& f = figures[mode];
      std::printf("%-28s %18.2f %22.2f\n", names[mode].c_str(), 1e3 * f.longest_call,
                  1e3 * f.publish_seconds / std::max(1, f.rounds));
    }
    auto mean = [&](int m) { return figures[m].publish_seconds / std::max(1, figures[m].rounds); };
    std::printf("the loop's longest stall, blocking / worker: %.1fx\n",
                figures[0].longest_call / std::max(1e-9, figures[1].longest_call));
    std::printf("time to publish, worker 1 thread / %u threads: %.2fx\n", threads, mean(1) / std::max(1e-9, mean(2)));
  }
  return 0;
}
