// bench_ring — throughput of RmaRing against raw MPI_Put + MPI_Win_flush of the same bytes,
// measured side by side in one run.
//
//   mpirun -np 4 --oversubscribe [--mca osc sm|ucx] build/bin/bench_ring [records_per_producer]
//
// Rank 0 hosts the windows (as the dataflow rank does); ranks 1..n-1 produce. For each record
// size: (a) the ring: producers push, rank 0 pops and copies out every record; (b) raw: each
// producer puts the same number of records of the same size into its own region of a window
// on rank 0, flushing after each (the cost of moving the bytes with completion, without any
// queue protocol). Prints records/s, GB/s and the ring/raw ratio.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/mpi.hpp"
#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/win.hpp"

using namespace astraflow;

namespace {

// The host loop yields this many times before it starts to nap, like a busy dataflow rank.
constexpr std::uint32_t kHostYields = 64;

struct Result {
  double seconds;
  double records;
  double bytes;
};

Result benchRing(const Comm& comm, std::size_t record_bytes, int per_producer) {
  // ~4 MiB ring with slots sized like the trajectory ring's default.
  const std::uint64_t slot = 4096;
  const std::uint64_t slots = std::max<std::uint64_t>(64, (4u << 20) / slot);
  RmaRing ring(comm, 0, RingGeometry{slots, slot}, RmaRing::Consumer::Host, "bench");
  std::vector<std::byte> record(record_bytes, std::byte{0x42});
  const int producers = comm.size() - 1;
  comm.barrier();
  const double t0 = MPI_Wtime();
  if (comm.rank() == 0) {
    std::vector<std::byte> got;
    const long total = long(producers) * per_producer;
    Backoff backoff(std::chrono::microseconds(50), kHostYields);
    for (long n = 0; n < total;) {
      if (ring.tryPop(got)) {
        ++n;
        backoff.reset();
      } else {
        ring.progress();
        backoff.wait();
      }
    }
  } else {
    for (int i = 0; i < per_producer; ++i) ring.push(record);
  }
  comm.barrier();
  const double dt = MPI_Wtime() - t0;
  return {dt, double(producers) * per_producer, double(producers) * per_producer * record_bytes};
}

Result benchRawPut(const Comm& comm, std::size_t record_bytes, int per_producer) {
  const int producers = comm.size() - 1;
  // Each producer owns a region of 64 records, reused round-robin.
  const std::size_t region = 64 * record_bytes;
  Win win = Win::allocate(comm, comm.rank() == 0 ? region * producers : 0, "bench-raw");
  win.lockAll();
  std::vector<std::byte> record(record_bytes, std::byte{0x42});
  comm.barrier();
  const double t0 = MPI_Wtime();
  if (comm.rank() == 0) {
    // The host only keeps MPI progressing, as the dataflow rank's loop does.
    int done = 0;
    MPI_Request req;
    MPI_Ibarrier(comm.raw(), &req);
    Backoff backoff(std::chrono::microseconds(20));
    while (!done) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) backoff.wait();
    }
  } else {
    const std::size_t base = (comm.rank() - 1) * region;
    for (int i = 0; i < per_producer; ++i) {
      const std::size_t off = base + (i % 64) * record_bytes;
      ASTRA_MPI_CHECK(MPI_Put(record.data(), int(record_bytes), MPI_BYTE, 0, MPI_Aint(off), int(record_bytes), MPI_BYTE,
                              win.raw()));
      win.flush(0);
    }
    MPI_Request req;
    MPI_Ibarrier(comm.raw(), &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  const double dt = MPI_Wtime() - t0;
  comm.barrier();
  return {dt, double(producers) * per_producer, double(producers) * per_producer * record_bytes};
}

}  // namespace

int main(int argc, char** argv) {
  MpiEnvironment mpi(&argc, &argv);
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    if (comm.rank() == 0) std::fprintf(stderr, "bench_ring needs at least 2 ranks (1 host + producers)\n");
    return 1;
  }
  const int per_producer = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (comm.rank() == 0) {
    std::printf("bench_ring: %d producers x %d records, host rank 0\n", comm.size() - 1, per_producer);
    std::printf("%10s %14s %10s %14s %10s %12s\n", "record", "ring rec/s", "ring GB/s", "raw rec/s", "raw GB/s",
                "ring/raw");
  }
  for (std::size_t bytes : {64ul, 1024ul, 16384ul, 262144ul}) {
    const int n = bytes >= 262144 ? std::max(1, per_producer / 8) : per_producer;
    const Result ring = benchRing(comm, bytes, n);
    const Result raw = benchRawPut(comm, bytes, n);
    if (comm.rank() == 0) {
      std::printf("%10zu %14.0f %10.3f %14.0f %10.3f %12.2f\n", bytes, ring.records / ring.seconds,
                  ring.bytes / ring.seconds / 1e9, raw.records / raw.seconds, raw.bytes / raw.seconds / 1e9,
                  (ring.records / ring.seconds) / (raw.records / raw.seconds));
    }
  }
  return 0;
}
