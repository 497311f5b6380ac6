// bench_weight_fanout — the weight store's pull fan-out (docs/simulation.md): N readers pull one
// version from the store on the dataflow rank; how long until all of them hold it.
//
//   mpirun -np N+2 --oversubscribe build/bin/bench_weight_fanout [megabytes=16] [rounds=5] [changed=0.05]
//          [reader|node|relay] [fanout=2] [delta|full]
//
// `reader` (the default): every reader pulls for itself (the store alone). `node`: the readers
// take each version through their node's shared copy (NodeWeights) as rollout ranks do, one pull
// from the store per node (ASTRAFLOW_NODE_RANKS=k makes pretend nodes of k readers on one
// machine). `relay`: the same, and versions go down a tree of nodes, `fanout` children per node
// (weights.relay_fanout), each node reading from its parent's copy (a full version) or delta
// ring (deltas) instead of the store.
// `full` (weights.mode: full): every round is a full version; rounds after the first show the
// steady state, with every slot's pages already touched once.
//
// Rank 0 hosts the store (as the dataflow rank does: it publishes what the trainer staged and
// keeps MPI progressing, napping with backoff); rank 1 stages versions (the trainer); ranks
// 2..N+1 read (the rollout ranks): each polls the published version as a rollout rank does
// between generate calls, and pulls as soon as a new one is out. Round 0 is a full pull for
// every reader; rounds 1..R change `changed` of the bf16 words and go as deltas. Per round:
// time from the publish to the last reader holding the version (checksum checked by the store),
// the mean reader's time, and the bytes all readers moved per second. Times are on the node's
// monotonic clock, so every rank must run on one node.
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
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"

using namespace astraflow;

namespace {

constexpr int kHost = 0, kTrainer = 1;
// The host naps as long as the dataflow rank's loop does when idle (DataflowRank::run).
constexpr std::chrono::microseconds kHostNap{1000};

// Waits on a non-blocking barrier; the host keeps the store's window progressing meanwhile.
void barrier(const Comm& comm, WeightStore& store) {
  MPI_Request req;
  MPI_Ibarrier(comm.raw(), &req);
  Backoff backoff(kHostNap);
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      if (comm.rank() == kHost) store.progress();
      backoff.wait();
    }
  }
}

// Seconds on the node's monotonic clock, shared by every process on it (MPI_Wtime need not be:
// Open MPI's counts from each process's own start). Readers and host must share a node.
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  MpiEnvironment mpi(&argc, &argv);
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  if (comm.size() < 3) {
    if (comm.rank() == 0) std::fprintf(stderr, "bench_weight_fanout needs at least 3 ranks (host, trainer, reader)\n");
    return 1;
  }
  const double megabytes = argc > 1 ? std::atof(argv[1]) : 16;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const double changed = argc > 3 ? std::atof(argv[3]) : 0.05;
  const auto bytes = static_cast<std::uint64_t>(megabytes * 1e6) & ~std::uint64_t{7};
  WeightStoreOptions options;
  options.delta = !(argc > 6 && std::string(argv[6]) == "full");
  WeightStore store(comm, kHost, bytes, "bench", options);
  const std::string mode = argc > 4 ? argv[4] : "reader";
  if (mode != "reader" && mode != "node" && mode != "relay") {
    if (comm.rank() == 0)
      std::fprintf(stderr, "bench_weight_fanout: mode '%s'; allowed: reader, node, relay\n", argv[4]);
    return 1;
  }
  const bool by_node = mode != "reader";
  const int fanout = mode == "relay" ? (argc > 5 ? std::atoi(argv[5]) : 2) : 0;
  // Collective on every rank in every mode (a constructor of the store's link); used only by_node.
  NodeWeights node(comm, by_node && comm.rank() >= 2, bytes, "bench",
                   {.fanout = fanout, .delta_ring = options.delta && fanout > 0 ? relayDeltaRingBytes(bytes) : 0});
  const int readers = comm.size() - 2;

  std::vector<std::byte> blob;
  std::mt19937_64 rng(7);
  if (comm.rank() == kTrainer) {
    blob.resize(bytes);
    for (std::uint64_t i = 0; i + 8 <= bytes; i += 8) {
      const std::uint64_t r = rng();
      std::memcpy(blob.data() + i, &r, 8);
    }
  }
  WeightReplica replica;
  if (comm.rank() == kHost) {
    const std::string how = mode == "reader" ? "one pull per reader"
                            : mode == "node" ? "one pull per node (NodeWeights), all from the store"
                                             : "one pull per node, versions relayed, fanout " + std::to_string(fanout);
    std::printf("bench_weight_fanout: %d readers, %.1f MB versions, %d delta rounds at %.3f changed, %s\n", readers,
                bytes / 1e6, rounds, changed, how.c_str());
    std::printf("%6s %6s %12s %14s %14s %12s %12s\n", "round", "pull", "MB/reader", "all updated s", "mean reader s",
                "agg GB/s", "store MB");
  }
  for (int v = 0; v <= rounds; ++v) {
    if (comm.rank() == kTrainer) {
      if (v > 0) {
        // A small optimiser step: `changed` of the bf16 words move by one unit in the last place.
        std::uniform_int_distribution<std::uint64_t> word(0, bytes / 2 - 1);
        const auto n = static_cast<std::uint64_t>(changed * static_cast<double>(bytes / 2));
        for (std::uint64_t k = 0; k < n; ++k) {
          auto* w = reinterpret_cast<std::uint16_t*>(blob.data()) + word(rng);
          *w = static_cast<std::uint16_t>(*w ^ 1u);
        }
      }
      store.stage(v, blob);
    }
    barrier(comm, store);  // staged: the round starts at the publish
    double t_publish = 0, t_done = 0;
    PullResult pulled;
    std::uint64_t from_store = 0;
    if (comm.rank() == kHost) {
      Backoff backoff(kHostNap);
      while (store.publishStaged() != v) backoff.wait();
      t_publish = now();
    }
    if (comm.rank() >= 2) {
      // Readers see it as rollout ranks do: the published version number, then the pull.
      Backoff backoff(std::chrono::microseconds(50), 4);
      while (store.publishedVersion() < v) {
        node.serve();  // as a rollout rank's loop does: its child nodes' reads of its node's copy
        backoff.wait();
      }
      std::int64_t holds = -1;
      if (by_node) {
        const std::uint64_t before = store.stats().bytes_pulled, relayed_before = node.relayStats().bytes;
        holds = node.refresh(store, v).version;
        from_store = store.stats().bytes_pulled - before;  // 0 for a reader whose node pulled it
        pulled.bytes = from_store + node.relayStats().bytes - relayed_before;
      } else {
        pulled = store.pull(replica);
        from_store = pulled.bytes;
        holds = replica.version;
      }
      t_done = now();
      if (holds != v)
        std::fprintf(stderr, "reader %d: holds %lld, not %d\n", comm.rank(), static_cast<long long>(holds), v);
    }
    barrier(comm, store);
    std::vector<double> done(comm.rank() == kHost ? comm.size() : 0);
    std::vector<std::uint64_t> moved(comm.rank() == kHost ? comm.size() : 0), served(moved.size());
    MPI_Gather(&t_done, 1, MPI_DOUBLE, done.data(), 1, MPI_DOUBLE, kHost, comm.raw());
    MPI_Gather(&pulled.bytes, 1, MPI_UINT64_T, moved.data(), 1, MPI_UINT64_T, kHost, comm.raw());
    MPI_Gather(&from_store, 1, MPI_UINT64_T, served.data(), 1, MPI_UINT64_T, kHost, comm.raw());
    if (comm.rank() == kHost) {
      double last = 0, sum = 0, total = 0, store_total = 0;
      for (int r = 2; r < comm.size(); ++r) {
        last = std::max(last, done[r] - t_publish);
        sum += done[r] - t_publish;
        total += static_cast<double>(moved[r]);
        store_total += static_cast<double>(served[r]);
      }
      std::printf("%6d %6s %12.3f %14.4f %14.4f %12.3f %12.1f\n", v, v == 0 || !options.delta ? "full" : "delta",
                  total / readers / 1e6, last, sum / readers, total / last / 1e9, store_total / 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
