#pragma once
// What one rank of a distributed run holds: its communicators, the rings and weight stores of
// the pools and trainer groups it belongs to, its trace writer and the run clock. Built by
// `astraflow run` (src/run, collectively); the dataflow rank's loop takes it whole (it hosts
// every window), a rollout or trainer rank gets only its own ports cut from it (RolloutPorts,
// TrainerPorts), so those roles never see this header:
//   runDataflowRole   (dataflow)  prompts, admission, ingest, batches, weights, metrics
//   runRolloutRole    (rollout)   tasks → episodes → trajectories, weight pulls
//   runTrainerRole    (trainer)   batches → optimiser steps → published versions
// The loops never call each other: they meet only through the rings and the weight stores.
// It lives in dataflow because the elastic pools wire spawned pools with it at run time.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_comms.hpp"
#include "astraflow/comm/role_context.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"

namespace astraflow {

struct RunWiring {
  RunWiring(const Config& c, const RoleMap& m, const RoleComms& rc) : cfg(c), map(m), comms(rc) {}

  const Config& cfg;
  const RoleMap& map;
  const RoleComms& comms;
  std::vector<std::unique_ptr<RmaRing>> task_rings;         // per pool; null where not a member
  std::vector<std::unique_ptr<RmaRing>> trajectory_rings;   // per pool
  std::vector<std::unique_ptr<RmaRing>> batch_rings;        // per trainer group (policy)
  std::vector<std::unique_ptr<WeightStore>> weight_stores;  // per trainer group (policy)
  std::vector<std::unique_ptr<NodeWeights>> node_weights;   // per trainer group: the rollout ranks' node copies
  io::TraceWriter* trace = nullptr;
  ReportSink* reports = nullptr;  // where the roles leave their figures while they run
  double t0 = 0;                  // the run clock's zero in mpiSeconds() (same on every rank up to skew)
  double clock_offset = 0;        // run time of earlier segments: a resumed run's clock continues
  std::filesystem::path run_dir;
  std::string run_id;                // the folder's run (core/run_files.hpp): stamped on every checkpoint and trace
  bool resume = false;               // continuing from the newest checkpoint in run_dir
  std::int64_t resume_version = -1;  // that checkpoint's version (set before the loops start)
  int ranks_on_node = 1;             // sizes LibTorch/BLAS threads (run.threads_per_rank = 0)
  int device_slot = 0;               // this rank's GPU slot on its node (plain `cuda`: GPU slot mod count)
  int rank_label_offset = 0;         // a spawned pool's ranks: 10000·(k+1), so trace and producer ranks stay unique
  bool peer_lost = false;            // the dataflow rank lost a spawned pool: leave with _exit (docs/elastic.md)
  std::vector<RankReport> spawned_reports;  // dataflow rank: the reports of retired spawned ranks
  // Bytes of one full weight version of a policy (builds its model once; set by the run, which
  // knows the tokenizer). Called on one rank per weight store, in wireWindows.
  std::function<std::uint64_t(const std::string& policy)> weight_version_bytes;

  int rank() const { return comms.world.rank(); }
  int labelRank() const { return rank_label_offset + rank(); }  // the rank in traces and trajectories
  const RankRole& role() const { return map.of(rank()); }
  double now() const;  // seconds on the run clock (earlier segments included)
  double segmentSeconds() const { return now() - clock_offset; }
  void event(TraceKind kind, double t_start, std::int64_t version, std::uint64_t bytes = 0, std::uint64_t count = 0,
             const TraceAbout& about = {}) const;
  // A data plug-in's counter as an event of kind "<counter>:<plug-in>" (count = its value): the
  // one family of kinds outside core/trace_kinds.hpp, named by the plug-ins a config loads.
  void counterEvent(const std::string& counter, const std::string& plugin, double t, std::int64_t version,
                    std::uint64_t value) const;
  // Index of `policy` in map.trainerGroups(), or -1.
  int policyIndex(const std::string& policy) const;
  // This rank's context for a role loop (config, rank, clock, trace, run folder).
  RoleContext context() const;
};

// Creates the rings and weight stores of `w`'s pools and trainer groups on their comms, in the
// same order on every rank of w.comms.world (each window is collective over its comm).
void wireWindows(RunWiring& w);

DataflowReport runDataflowRole(RunWiring& w);
GatewayReport runGatewayRole(RunWiring& w);  // a remote site's hub (src/dataflow/gateway_role.cpp)

// A spawned pool's process (`astraflow spawned-pool`, started by the dataflow rank with
// MPI_Comm_spawn): joins its parent, wires its windows, runs `rollout` (the RaaS loop, which
// the run module supplies: dataflow does not depend on rollout), reports back and disconnects.
// Returns the exit code.
using RolloutLoop = std::function<RolloutReport(RunWiring&)>;
int runSpawnedPool(int argc, char** argv, const RolloutLoop& rollout);

}  // namespace astraflow
