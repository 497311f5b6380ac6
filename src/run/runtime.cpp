// runRuntime, the distributed run behind `astraflow run`: run folder settled (fresh or resumed), memory plan checked,
// windows wired, this rank's role run; then summary.json from every rank's report and the merged trace.h5.
#include "astraflow/run/runtime.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/dataflow/dataflow_checkpoint.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/model/model_setup.hpp"
#include "astraflow/run/memory_plan.hpp"
#include "astraflow/run/private_memory_peak.hpp"
#include "astraflow/run/rank_report_files.hpp"
#include "astraflow/run/role_entry.hpp"
#include "astraflow/tasks/environment.hpp"
#include "run/memory_check.hpp"
#include "run/run_folder.hpp"
#include "run/summary.hpp"

namespace astraflow {

namespace fs = std::filesystem;

namespace {

// run.keep_checkpoints once every checkpoint is complete (the dataflow rank pruned as they came):
// the best evaluated version stays under keep_best; the count removed over the run goes in the summary.
void pruneAtTheEnd(const Config& cfg, const RoleMap& map, const fs::path& run_dir, nlohmann::json& summary) {
  std::vector<std::string> policies;
  for (const auto& g : map.trainerGroups()) policies.push_back(g.policy);
  std::vector<std::int64_t> protect;
  if (cfg.run.keep_best && summary["eval_best_version"].is_number())
    protect.push_back(summary["eval_best_version"].get<std::int64_t>());
  const auto removed =
      pruneCheckpoints(run_dir, policies, cfg.run.keep_checkpoints, protect, std::numeric_limits<std::int64_t>::max());
  std::uint64_t pruned = removed.size();
  for (const auto& r : summary["ranks"])
    if (r.value("role", "") == "dataflow") pruned += r.value("checkpoints_pruned", std::uint64_t{0});
  summary["checkpoints_pruned"] = pruned;
  for (const auto v : removed) spdlog::info("run.keep_checkpoints: checkpoint v{} removed", v);
}

struct NodePlace {
  int ranks_on_node = 1;
  int device_slot = 0;  // among this node's ranks asking for plain `cuda`
};

// Collective over the world: how many ranks share this node, and this rank's GPU slot.
NodePlace nodePlace(const Comm& world, bool wants_node_gpu) {
  const Comm node = world.splitByNode();
  NodePlace place;
  place.ranks_on_node = node.size();
  place.device_slot = node.exclusiveSum(wants_node_gpu ? 1 : 0);
  return place;
}

const DeviceRequest* deviceOf(const Config& cfg, Role role) {
  return role == Role::Trainer   ? &cfg.trainer.compute.device
         : role == Role::Rollout ? &cfg.rollout.compute.device
                                 : nullptr;
}
bool wantsGpu(const Config& cfg, Role role) { return deviceOf(cfg, role) && deviceOf(cfg, role)->cuda(); }
// Plain `cuda` for this rank's role: the GPU comes from its node-local slot.
bool wantsNodeGpu(const Config& cfg, Role role) { return wantsGpu(cfg, role) && deviceOf(cfg, role)->index < 0; }

// Where the run writes and which run it is (collective over `world`; the dataflow rank decides):
// a resumed run takes its folder's newest checkpoint of its own run; a fresh one is refused in
// a folder holding another run (run_folder.hpp), gets a new id and writes its config.yaml.
struct RunStart {
  fs::path run_dir;
  std::string run_id;
  std::int64_t resume_version = -1;
};

RunStart settleRunFolder(const Config& cfg, const RoleMap& map, const Comm& world, const RuntimeOptions& options) {
  const int df_rank = map.dataflowRank();
  const bool is_df = world.rank() == df_rank;
  const bool resume = !options.resume_dir.empty();
  RunStart start{resume ? fs::path(options.resume_dir) : fs::path(cfg.run.output_dir), {}, -1};
  const fs::path& run_dir = start.run_dir;
  if (resume && cfg.isGatewaySite()) {
    throw ConfigError(
        fmt::format("--resume {}: a gateway site keeps no checkpoints (its home job does); start it "
                    "anew, it reconnects and pulls the current weights",
                    run_dir.string()));
  }
  if (resume) {
    std::vector<std::string> policies;
    for (const auto& g : map.trainerGroups()) policies.push_back(g.policy);
    run_detail::ResumePoint point;
    if (is_df) point = run_detail::checkpointToResume(run_dir, policies);
    start.resume_version = point.version;
    start.resume_version = world.broadcastValue(df_rank, start.resume_version);
    start.run_id = world.broadcastString(df_rank, point.run_id);
    const std::string said = world.broadcastString(df_rank, point.message);
    if (start.resume_version < 0) throw ConfigError(fmt::format("--resume {}: {}", run_dir.string(), said));
    if (is_df) spdlog::info("--resume {}: {}", run_dir.string(), said);
  } else {
    std::string refusal;
    if (is_df) {
      // A gateway site keeps no checkpoints and is restarted into its folder to rejoin: it starts over.
      refusal = run_detail::refuseUsedFolder(run_dir, options.overwrite || cfg.isGatewaySite());
      start.run_id = newRunId();
    }
    refusal = world.broadcastString(df_rank, refusal);
    if (!refusal.empty()) throw ConfigError(refusal);
    start.run_id = world.broadcastString(df_rank, start.run_id);
  }
  if (is_df) {
    fs::create_directories(run_dir / "trace");
    fs::create_directories(run_dir / "checkpoints");
    if (!resume) std::ofstream(run_dir / "config.yaml") << runIdLine(start.run_id) << cfg.text;
  }
  world.barrier();
  return start;
}

// This rank's role loop, recording into its own trace file and leaving its report in its report
// file as it goes (both flushed every run.flush_seconds, so a killed run keeps them); returns the
// report, whose final form is left there too.
RankReport runRankRole(RunWiring& w, const RankMemoryPlan* plan, const PrivateMemoryPeak& private_peak) {
  const Config& cfg = w.cfg;
  const int me = w.rank();
  RankReport mine{me, w.role().label(), {}};
  if (plan != nullptr) {
    mine.memory_plan_bytes = plan->total();
    mine.memory_plan_private_bytes = plan->privateTotal();
  }
  measureProcess(mine, &private_peak);  // the start-up's CPU: all of it is behind this rank by now
  mine.startup_cpu_seconds = mine.cpu_seconds;
  RankReportFile report_file(rankReportPath(w.run_dir, me), mine, cfg.run.flush_seconds, &private_peak);
  {
    io::TraceWriter trace((w.run_dir / "trace" / fmt::format("rank_{}.h5", me)).string());
    trace.setFlushSeconds(cfg.run.flush_seconds);
    if (!w.run_id.empty()) trace.tagRun(w.run_id);
    w.trace = &trace;
    w.reports = &report_file;
    w.event(TraceKind::Startup, 0.0, w.resume_version);
    mine.figures = runRole(w);
    w.trace = nullptr;
    w.reports = nullptr;
    trace.markCleanEnd();
  }
  measureProcess(mine, &private_peak);
  report_file.writeFinal(mine);
  return mine;
}

// The dataflow rank's last step: every rank's trace file (and a resumed run's earlier trace.h5,
// and the spawned pools' files that can be read) merged into <run>/trace.h5.
void mergeRunTraces(const fs::path& run_dir, const std::string& run_id, int world_size, bool resume,
                    std::int64_t resume_version) {
  std::vector<std::string> inputs;
  const fs::path merged = run_dir / "trace.h5";
  if (resume && fs::exists(merged)) {
    const fs::path before = run_dir / "trace" / fmt::format("before_resume_v{}.h5", resume_version);
    fs::rename(merged, before);
    inputs.push_back(before.string());
  }
  for (int r = 0; r < world_size; ++r) inputs.push_back((run_dir / "trace" / fmt::format("rank_{}.h5", r)).string());
  // Spawned pools' ranks wrote their own files; one killed mid-run may have left an unreadable one.
  for (const auto& entry : fs::directory_iterator(run_dir / "trace")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("spawn", 0) != 0) continue;
    try {
      io::readTraceEvents(entry.path().string());
      inputs.push_back(entry.path().string());
    } catch (const std::exception& e) {
      spdlog::warn("trace: {} left out of trace.h5: {}", entry.path().string(), e.what());
    }
  }
  io::mergeTraceFiles(inputs, merged.string(), run_id);
}

}  // namespace

RunOutcome runRuntime(const Config& cfg, const RoleMap& map, const RoleComms& comms, const RuntimeOptions& options) {
  const Comm& world = comms.world;
  const int me = world.rank();
  const int df_rank = map.dataflowRank();
  const bool is_df = me == df_rank;
  const bool resume = !options.resume_dir.empty();
  const PrivateMemoryPeak private_peak;  // sampled from here to the summary (docs/memory.md)
  const RunStart start = settleRunFolder(cfg, map, world, options);
  const fs::path& run_dir = start.run_dir;
  const std::string& run_id = start.run_id;
  const std::int64_t resume_version = start.resume_version;

  // Before any window, model or engine is allocated.
  const auto memory_plans = checkMemoryPlan(cfg, map, world);

  RunWiring w{cfg, map, comms};
  w.run_dir = run_dir;
  w.run_id = run_id;
  w.resume = resume;
  w.resume_version = resume_version;
  const NodePlace place = nodePlace(world, wantsNodeGpu(cfg, map.of(me).role));
  if (wantsGpu(cfg, map.of(me).role)) loadCudaSupport();  // before any LibTorch call on this rank
  w.ranks_on_node = place.ranks_on_node;
  w.device_slot = place.device_slot;
  w.weight_version_bytes = [&cfg](const std::string& policy) {
    return weightVersionBytes(cfg, tokenSpecOf(*makeEnvironmentTokenizer(cfg.environment)), policy);
  };
  wireWindows(w);

  if (resume) {
    double offset = 0;
    if (is_df) offset = readDataflowCheckpoint(run_dir, resume_version).wall_seconds;
    offset = world.broadcastValue(df_rank, offset);
    w.clock_offset = offset;
  }
  world.barrier();
  w.t0 = mpiSeconds() - w.clock_offset;
  const RankReport mine =
      runRankRole(w, memory_plans.empty() ? nullptr : &memory_plans[static_cast<std::size_t>(me)], private_peak);

  std::vector<RankReport> reports;
  for (const auto& bytes : world.gatherBytes(df_rank, encodeRankReport(mine))) {
    reports.push_back(decodeRankReport(bytes));
  }
  RunOutcome outcome;
  outcome.peer_lost = world.broadcastValue(df_rank, w.peer_lost);
  if (is_df) {
    reports.insert(reports.end(), w.spawned_reports.begin(), w.spawned_reports.end());
    auto summary = cfg.isGatewaySite() ? run_detail::summarizeSite(cfg, reports)
                                       : run_detail::summarize(cfg, reports, resume_version);
    // Every trainer has written its last checkpoint by now (the gather above waited for them).
    if (cfg.run.keep_best && !cfg.isGatewaySite())
      summary["best_checkpoint"] = run_detail::keepBestCheckpoint(cfg, run_dir, summary);
    if (cfg.run.keep_checkpoints > 0 && !cfg.isGatewaySite()) pruneAtTheEnd(cfg, map, run_dir, summary);
    outcome.reporting_rank = true;
    outcome.summary_json = summary.dump();
    std::ofstream(run_dir / "summary.json") << summary.dump(2) << "\n";
  }
  world.barrier();  // every per-rank trace file is closed
  if (is_df) mergeRunTraces(run_dir, run_id, world.size(), resume, resume_version);
  world.barrier();
  return outcome;
}

}  // namespace astraflow
