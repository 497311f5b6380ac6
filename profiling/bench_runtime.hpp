#pragma once
// Shared by the runtime benchmarks: run one job of the dataflow runtime on MPI_COMM_WORLD in a
// scratch folder and return its summary (on the reporting rank; null elsewhere).
#include <mpi.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/run/runtime.hpp"

namespace astraflow::bench {

struct World {
  int size = 0, rank = 0;
};
inline World world() {
  World w;
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  return w;
}

inline std::string scratchDir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("astraflow_bench_" + name)).string();
}

// `make_config(dir)` builds the job's config for its scratch folder `dir`.
template <class MakeConfig>
nlohmann::json runJob(const std::string& name, MakeConfig make_config) {
  const auto [world, rank] = bench::world();
  const std::string dir = scratchDir(name);
  if (rank == 0) std::filesystem::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  const Config cfg = make_config(dir);
  RoleMap map(cfg, world);
  RoleComms comms = RoleComms::split(map);
  const auto outcome = runRuntime(cfg, map, comms, RuntimeOptions{});
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
  return outcome.reporting_rank ? nlohmann::json::parse(outcome.summary_json) : nlohmann::json();
}

// Seconds per optimiser step of a trainer rank (batch wait included).
inline double secondsPerStep(const nlohmann::json& rank_report) {
  return (rank_report["batch_wait_seconds"].get<double>() + rank_report["step_seconds"].get<double>()) /
         std::max(1.0, rank_report["steps"].get<double>());
}

}  // namespace astraflow::bench
