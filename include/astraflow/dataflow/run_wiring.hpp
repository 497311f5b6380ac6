#pragma once
// What one rank of a distributed run holds: its communicators, the rings and weight stores of
// the pools and trainer groups it belongs to, its trace writer and the run clock. Built by
// `astraflow run` (collectively), then handed to exactly one role loop:
//   runDataflowRole   (src/dataflow)  prompts, admission, ingest, batches, weights, metrics
//   runRolloutRole    (src/rollout)   tasks → episodes → trajectories, weight pulls
//   runTrainerRole    (src/trainer)   batches → optimiser steps → published versions
// The loops never call each other: they meet only through the rings and the weight stores.
//
// End of the run: the dataflow rank ends every stream in-band — an end-of-stream task for
// each rollout rank, an end-of-stream batch for each trainer group — so no rank is ever
// stopped in the middle of a record.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/weights/weight_store.hpp"

namespace astraflow {

inline constexpr const char* kEndOfStreamKind = "end-of-stream";
inline constexpr std::uint64_t kEndOfStreamBatchId = ~std::uint64_t{0};

// Task metadata keys the dataflow rank sets and RaaS ranks read.
inline constexpr const char* kTaskEvalKey = "eval";                // present: greedy evaluation task
inline constexpr const char* kTaskMinVersionKey = "min_version";   // generate with weights >= this

// Trajectories from a remote site carry pool_uid = kSitePoolUidBase + the site's index at home
// (local pools: their pool index), so trainers and trajectories.h5 can tell them apart.
inline constexpr std::uint32_t kSitePoolUidBase = 1u << 16;

inline bool isEndOfStream(const Task& task) { return task.kind == kEndOfStreamKind; }
inline bool isEndOfStream(const Batch& batch) {
  return batch.batch_id == kEndOfStreamBatchId && batch.trajectories.empty();
}

// Figures one rank reports at the end (gathered into summary.json under "ranks").
using RankReport = std::map<std::string, double>;

struct RunWiring {
  RunWiring(const Config& c, const RoleMap& m, const RoleComms& rc) : cfg(c), map(m), comms(rc) {}

  const Config& cfg;
  const RoleMap& map;
  const RoleComms& comms;
  std::vector<std::unique_ptr<RmaRing>> task_rings;        // per pool; null where not a member
  std::vector<std::unique_ptr<RmaRing>> trajectory_rings;  // per pool
  std::vector<std::unique_ptr<RmaRing>> batch_rings;       // per trainer group (policy)
  std::vector<std::unique_ptr<WeightStore>> weight_stores; // per trainer group (policy)
  io::TraceWriter* trace = nullptr;
  double t0 = 0;                     // the run clock's zero in MPI_Wtime() (same on every rank up to skew)
  double clock_offset = 0;           // run time of earlier segments: a resumed run's clock continues
  std::filesystem::path run_dir;
  bool resume = false;               // continuing from the newest checkpoint in run_dir
  std::int64_t resume_version = -1;  // that checkpoint's version (set before the loops start)
  int ranks_on_node = 1;             // sizes LibTorch/BLAS threads (run.threads_per_rank = 0)
  int rank_label_offset = 0;         // a spawned pool's ranks: 10000·(k+1), so trace and producer ranks stay unique
  bool peer_lost = false;            // the dataflow rank lost a spawned pool: leave with _exit (ARCHITECTURE §9)
  std::vector<std::string> spawned_reports;  // dataflow rank: the RankReports (JSON) of retired spawned ranks

  int rank() const { return comms.world.rank(); }
  int labelRank() const { return rank_label_offset + rank(); }  // the rank in traces and trajectories
  const RankRole& role() const { return map.of(rank()); }
  double now() const;  // seconds on the run clock (earlier segments included)
  double segmentSeconds() const { return now() - clock_offset; }
  void event(const char* kind, double t_start, std::int64_t version, std::uint64_t bytes = 0,
             std::uint64_t count = 0) const;
  // Index of `policy` in map.trainerGroups(), or -1.
  int policyIndex(const std::string& policy) const;
};

// Creates the rings and weight stores of `w`'s pools and trainer groups on their comms, in the
// same order on every rank of w.comms.world (each window is collective over its comm).
void wireWindows(RunWiring& w);

// Bytes of one full weight version of a policy's model (its weight store's capacity; the
// first policy's when `policy` is empty). Builds the model once to measure it.
std::uint64_t weightVersionBytes(const Config& cfg, const std::string& policy = {});

RankReport runDataflowRole(RunWiring& w);
RankReport runRolloutRole(RunWiring& w);
RankReport runTrainerRole(RunWiring& w);
RankReport runGatewayRole(RunWiring& w);
// A spawned pool's process (`astraflow spawned-pool`, started by the dataflow rank with
// MPI_Comm_spawn): joins its parent, wires its windows, runs the RaaS loop, reports back and
// disconnects. Returns the exit code.
int runSpawnedPool(int argc, char** argv);  // a remote site's hub (src/dataflow/gateway_role.cpp)

// Checkpoint files of a run folder (ARCHITECTURE §10):
//   checkpoints/step_<V>.h5            dataflow state, config, version; links to the next two
//   checkpoints/step_<V>.<policy>.h5   trainer state of one policy (fp32 weights + AdamW state)
//   checkpoints/step_<V>.buffer.h5     trajectories held by the dataflow rank (trajectories.h5 layout)
std::filesystem::path checkpointPath(const std::filesystem::path& run_dir, std::int64_t version);
std::filesystem::path trainerCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version,
                                            const std::string& policy);
std::filesystem::path bufferCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version);
// The newest complete checkpoint's version (its dataflow file and every policy's trainer file
// exist), or -1 when there is none.
std::int64_t newestCheckpoint(const std::filesystem::path& run_dir, const std::vector<std::string>& policies);

}  // namespace astraflow
