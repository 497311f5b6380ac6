#pragma once
// Helpers of the end-to-end runtime tests (test_runtime, test_multi_policy): run folders shared
// by all ranks, running a job collectively, and reading its summary.
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/run/runtime.hpp"

namespace astraflow {

namespace fs = std::filesystem;
using nlohmann::json;

inline int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int worldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A fresh folder named by rank 0, the same on every rank.
inline std::string sharedRunDir(const std::string& test) {
  long pid = worldRank() == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const auto dir = fs::temp_directory_path() / ("astraflow_rt_" + std::to_string(pid) + "_" + test);
  if (worldRank() == 0) fs::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir.string();
}

// Runs the job on every rank; returns the summary on world rank 0 (the dataflow rank).
inline json runJob(const Config& cfg, const std::string& resume_dir = "") {
  RoleMap map(cfg, worldSize());
  RoleComms comms = RoleComms::split(map);
  const RunOutcome outcome = runRuntime(cfg, map, comms, RuntimeOptions{resume_dir});
  return outcome.reporting_rank ? json::parse(outcome.summary_json) : json();
}

inline std::vector<json> ranksOf(const json& summary, const std::string& role) {
  std::vector<json> out;
  for (const auto& r : summary["ranks"]) {
    if (r["role"] == role) out.push_back(r);
  }
  return out;
}

inline std::int64_t num(const json& j, const char* key) { return static_cast<std::int64_t>(j[key].get<double>()); }

}  // namespace astraflow
