// runJob, `astraflow run` under mpirun: MPI up, the RoleMap and RoleComms built, the ring windows checked against the
// dataflow rank's node memory, then runRuntime; errors end the job on every rank with one message.
#include "apps/run_job.hpp"

#include "apps/death_report.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/run/runtime.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

RingGeometry geometryOf(const RingSection& s) { return RingGeometry{s.slots, s.slot_bytes}; }

// Collective over world: rank 0 prints which host runs which role.
void printRoleMap(const Comm& world, const RoleMap& map) {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  const auto hosts = world.gatherBytes(0, std::as_bytes(std::span(host)));
  if (world.rank() != 0) return;
  std::string table = map.describe();
  for (int r = 0; r < world.size(); ++r) {
    table += fmt::format("  rank {:>4}  {:<24} on {}\n", r, map.of(r).label(),
                         reinterpret_cast<const char*>(hosts[static_cast<std::size_t>(r)].data()));
  }
  spdlog::info("{}", table);
}

// Collective over world. The dataflow rank hosts every ring window: it checks that they all
// fit its node before anyone allocates, and every rank learns the verdict, so a config that
// asks for too much ends the run on all ranks with one message instead of a hang.
bool windowsFit(const Config& cfg, const RoleMap& map, const Comm& world) {
  char verdict[1024] = {0};
  if (world.rank() == map.dataflowRank()) {
    const std::uint64_t per_pool = RmaRing::windowBytes(geometryOf(cfg.dataflow.task_ring)) +
                                   RmaRing::windowBytes(geometryOf(cfg.dataflow.trajectory_ring));
    const std::uint64_t need = per_pool * map.pools().size() +
                               RmaRing::windowBytes(geometryOf(cfg.dataflow.batch_ring)) * map.trainerGroups().size();
    const std::uint64_t avail = availableMemoryBytes();
    if (avail != 0 && need > avail) {
      std::snprintf(verdict, sizeof verdict,
                    "the dataflow rank's ring windows need %s (dataflow.task_ring, trajectory_ring per pool; "
                    "batch_ring per policy) but this node has %s available; reduce slots or slot_bytes",
                    humanBytes(need).c_str(), humanBytes(avail).c_str());
    }
  }
  const std::string said = world.broadcastString(map.dataflowRank(), verdict);
  if (!said.empty() && world.rank() == map.dataflowRank()) spdlog::error("{}", said);
  return said.empty();
}

}  // namespace

int runJob(int argc, char** argv, const Config& cfg, const RuntimeOptions& options) {
  std::optional<MpiEnvironment> env;
  try {
    env.emplace(&argc, &argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
  const int rank = MpiEnvironment::worldRank(), size = MpiEnvironment::worldSize();

  std::unique_ptr<RoleMap> map;
  try {
    map = std::make_unique<RoleMap>(cfg, size);
  } catch (const LayoutError& e) {
    // Every rank computed the same mismatch: one message, every rank leaves.
    // The first rank reports and fails the job; the others leave with 0 so mpirun does not
    // kill it before its message is out.
    if (rank != 0) return 0;
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
  initLogging(rank, map->of(rank).label(), cfg.run.log_level);

  try {
    RoleComms comms = RoleComms::split(*map);
    if (!windowsFit(cfg, *map, comms.world)) return rank == map->dataflowRank() ? 1 : 0;
    printRoleMap(comms.world, *map);
    installDeathReport(comms.world, *map);
    RunOutcome outcome;
    try {
      outcome = runRuntime(cfg, *map, comms, options);
    } catch (const ConfigError& e) {
      // Met alike by every rank before any role started (e.g. nothing to resume from).
      if (rank != map->dataflowRank()) return 0;
      spdlog::error("{}", e.what());
      return 2;
    }
    if (outcome.reporting_rank) {
      spdlog::info("run finished; summary in {}/summary.json, trace in {}/trace.h5",
                   options.resume_dir.empty() ? cfg.run.output_dir : options.resume_dir,
                   options.resume_dir.empty() ? cfg.run.output_dir : options.resume_dir);
      spdlog::default_logger()->flush();
      std::printf("%s\n", outcome.summary_json.c_str());
      std::fflush(stdout);
    }
    if (outcome.peer_lost) {
      // A spawned rank died: MPI_Finalize would wait for it forever (docs/architecture.md §9). The files
      // are written and closed; every rank leaves without it.
      spdlog::warn("a spawned rollout pool was lost during the run: leaving without MPI_Finalize");
      spdlog::shutdown();
      std::fflush(nullptr);
      env->skipFinalize();
      _exit(0);
    }
    return 0;
  } catch (const std::exception& e) {
    // Met by this rank alone: the others may be waiting on it, so end the whole job.
    spdlog::error("{}", e.what());
    spdlog::shutdown();
    MpiEnvironment::abortJob(1);
  }
}

}  // namespace astraflow
