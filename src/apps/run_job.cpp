#include "apps/run_job.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/io/trace_writer.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kHandshakeTimeout = 120s;

RingGeometry geometryOf(const RingSection& s) { return RingGeometry{s.slots, s.slot_bytes}; }

std::vector<std::byte> bytesOf(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string stringOf(const std::vector<std::byte>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// Collective over world: rank 0 prints which host runs which role.
void printRoleMap(const Comm& world, const RoleMap& map) {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(world.rank() == 0 ? 64 * world.size() : 0);
  ASTRA_MPI_CHECK(MPI_Gather(host, 64, MPI_CHAR, hosts.data(), 64, MPI_CHAR, 0, world.raw()));
  if (world.rank() != 0) return;
  std::string table = map.describe();
  for (int r = 0; r < world.size(); ++r) {
    table += fmt::format("  rank {:>4}  {:<24} on {}\n", r, map.of(r).label(), &hosts[64 * r]);
  }
  spdlog::info("{}", table);
}

// Brings the roles up over the same rings the runtime uses: the dataflow rank hands one task
// to every rollout rank of every pool through the pool's task ring and collects one
// trajectory-ring record back from each; it hands one record to every trainer rank through
// its batch ring. Proves every window, every comm and both ring directions work.
void rolesUp(const RoleMap& map, const RoleComms& comms, const Config& cfg, io::TraceWriter& trace, double t0) {
  const int me = comms.world.rank();
  const RankRole& role = map.of(me);
  auto event = [&](const char* kind, double start, std::uint64_t bytes) {
    trace.record({me, roleName(role.role), kind, start, MPI_Wtime() - t0, 0, bytes});
  };

  for (std::size_t p = 0; p < map.pools().size(); ++p) {
    if (!comms.pools[p].valid()) continue;
    const auto& pool = map.pools()[p];
    const double start = MPI_Wtime() - t0;
    RmaRing tasks(comms.pools[p], 0, geometryOf(cfg.dataflow.task_ring), RmaRing::Consumer::Remote,
                  "task_ring:" + pool.name);
    RmaRing trajectories(comms.pools[p], 0, geometryOf(cfg.dataflow.trajectory_ring), RmaRing::Consumer::Host,
                         "trajectory_ring:" + pool.name);
    std::vector<std::byte> record;
    if (role.role == Role::Dataflow) {
      for (std::size_t i = 0; i < pool.world_ranks.size(); ++i) tasks.push(bytesOf(fmt::format("hello task {}", i)));
      for (std::size_t i = 0; i < pool.world_ranks.size(); ++i) {
        if (!trajectories.pop(record, kHandshakeTimeout)) {
          throw Error(fmt::format("pool {}: only {} of {} rollout ranks answered within {} s", pool.name, i,
                                  pool.world_ranks.size(), kHandshakeTimeout.count()));
        }
        spdlog::debug("pool {}: {}", pool.name, stringOf(record));
      }
      spdlog::info("pool {}: {} rollout ranks up (task ring {}x{} B, trajectory ring {}x{} B)", pool.name,
                   pool.world_ranks.size(), tasks.geometry().slots, tasks.geometry().slot_bytes,
                   trajectories.geometry().slots, trajectories.geometry().slot_bytes);
    } else {
      if (!tasks.pop(record, kHandshakeTimeout)) throw Error("no task from the dataflow rank within the handshake time");
      trajectories.push(bytesOf(fmt::format("rank {} ({}) took '{}'", me, role.label(), stringOf(record))));
    }
    comms.pools[p].barrier();  // windows are freed collectively below
    event("handshake", start, tasks.stats().bytes_popped + trajectories.stats().bytes_pushed);
  }

  for (std::size_t g = 0; g < map.trainerGroups().size(); ++g) {
    if (!comms.trainer_links[g].valid()) continue;
    const auto& group = map.trainerGroups()[g];
    const double start = MPI_Wtime() - t0;
    RmaRing batches(comms.trainer_links[g], 0, geometryOf(cfg.dataflow.batch_ring), RmaRing::Consumer::Remote,
                    "batch_ring:" + group.policy);
    std::vector<std::byte> record;
    if (role.role == Role::Dataflow) {
      for (std::size_t i = 0; i < group.world_ranks.size(); ++i) batches.push(bytesOf("hello batch"));
      spdlog::info("trainer group {}: batch ring {}x{} B up", group.policy, batches.geometry().slots,
                   batches.geometry().slot_bytes);
    } else if (!batches.pop(record, kHandshakeTimeout)) {
      throw Error("no batch from the dataflow rank within the handshake time");
    }
    comms.trainer_links[g].barrier();
    event("handshake", start, batches.stats().bytes_popped);
  }
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
  ASTRA_MPI_CHECK(MPI_Bcast(verdict, sizeof verdict, MPI_CHAR, map.dataflowRank(), world.raw()));
  if (verdict[0] && world.rank() == map.dataflowRank()) spdlog::error("{}", verdict);
  return verdict[0] == 0;
}

}  // namespace

int runJob(int argc, char** argv, const Config& cfg) {
  std::optional<MpiEnvironment> env;
  try {
    env.emplace(&argc, &argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::unique_ptr<RoleMap> map;
  try {
    map = std::make_unique<RoleMap>(cfg, size);
  } catch (const LayoutError& e) {
    // Every rank computed the same mismatch: one message, every rank leaves.
    if (rank == 0) std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
  initLogging(rank, map->of(rank).label(), cfg.run.log_level);

  try {
    RoleComms comms = RoleComms::split(*map);
    if (!windowsFit(cfg, *map, comms.world)) return 1;
    const fs::path run_dir = cfg.run.output_dir;
    if (rank == 0) fs::create_directories(run_dir / "trace");
    comms.world.barrier();
    const double t0 = MPI_Wtime();

    const std::string rank_trace = (run_dir / "trace" / fmt::format("rank_{}.h5", rank)).string();
    {
      io::TraceWriter trace(rank_trace);
      trace.record({rank, roleName(map->of(rank).role), "startup", 0.0, MPI_Wtime() - t0, 0, 0});
      printRoleMap(comms.world, *map);
      rolesUp(*map, comms, cfg, trace, t0);
      trace.flush();
    }
    comms.world.barrier();
    if (rank == 0) {
      std::vector<std::string> inputs;
      for (int r = 0; r < size; ++r) inputs.push_back((run_dir / "trace" / fmt::format("rank_{}.h5", r)).string());
      io::mergeTraceFiles(inputs, (run_dir / "trace.h5").string());
      spdlog::info("all {} ranks up; trace in {}; the training runtime is not part of this build yet", size,
                   (run_dir / "trace.h5").string());
    }
    comms.world.barrier();
    return 0;
  } catch (const std::exception& e) {
    // Met by this rank alone: the others may be waiting on it, so end the whole job.
    spdlog::error("{}", e.what());
    spdlog::shutdown();
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

}  // namespace astraflow
