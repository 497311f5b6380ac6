// The shared files of a run folder: checkpoint paths and which checkpoints are complete, the files a run owns
// (runFilesIn, and removeRunFiles for --overwrite), and the run id on the first line of config.yaml.
#include "astraflow/core/run_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>

namespace astraflow {

namespace fs = std::filesystem;

fs::path checkpointPath(const fs::path& run_dir, std::int64_t version) {
  return run_dir / "checkpoints" / fmt::format("step_{}.h5", version);
}

fs::path trainerCheckpointPath(const fs::path& run_dir, std::int64_t version, const std::string& policy) {
  return run_dir / "checkpoints" / fmt::format("step_{}.{}.h5", version, policy);
}

fs::path bufferCheckpointPath(const fs::path& run_dir, std::int64_t version) {
  return run_dir / "checkpoints" / fmt::format("step_{}.buffer.h5", version);
}

std::vector<std::int64_t> completeCheckpoints(const fs::path& run_dir, const std::vector<std::string>& policies) {
  std::vector<std::int64_t> versions;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    const std::string name = entry.path().filename().string();
    std::int64_t v = -1;
    char tail[8] = {0};
    // Exactly "step_<V>.h5": the dataflow file of a checkpoint.
    if (std::sscanf(name.c_str(), "step_%ld%7s", &v, tail) != 2 || std::string(tail) != ".h5") continue;
    bool complete = fs::exists(bufferCheckpointPath(run_dir, v));
    for (const auto& p : policies) complete = complete && fs::exists(trainerCheckpointPath(run_dir, v, p));
    if (complete) versions.push_back(v);
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

std::int64_t checkpointSpace(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path dir = checkpointPath(run_dir, 0).parent_path();
  fs::create_directories(dir, ec);
  const auto space = fs::space(dir, ec);
  return ec ? -1 : static_cast<std::int64_t>(space.available);
}

std::int64_t newestCheckpoint(const fs::path& run_dir, const std::vector<std::string>& policies) {
  const auto versions = completeCheckpoints(run_dir, policies);
  return versions.empty() ? -1 : versions.front();
}

namespace {

constexpr std::array<const char*, 9> kRunFiles = {"config.yaml", "summary.json", "trace.h5", "trajectories.h5", "trace",
                                                  "checkpoints", "hf",           "balance",  "served_weights"};
constexpr std::string_view kRunIdPrefix = "# astraflow run_id: ";

}  // namespace

std::vector<fs::path> runFilesIn(const fs::path& run_dir) {
  std::vector<fs::path> present;
  std::error_code ec;
  for (const char* name : kRunFiles) {
    const fs::path p = run_dir / name;
    if (!fs::exists(p, ec)) continue;
    // An empty folder holds nothing of a run (a failed start may leave trace/ or checkpoints/).
    if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) continue;
    present.push_back(p);
  }
  return present;
}

void removeRunFiles(const fs::path& run_dir) {
  for (const char* name : kRunFiles) fs::remove_all(run_dir / name);
}

std::string newRunId() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device entropy;
  return fmt::format("{}-{:08x}", stamp, entropy());
}

std::string runIdLine(const std::string& id) { return fmt::format("{}{}\n", kRunIdPrefix, id); }

std::string runIdOf(const fs::path& run_dir) {
  std::ifstream in(run_dir / "config.yaml");
  std::string first;
  if (!std::getline(in, first) || first.rfind(kRunIdPrefix, 0) != 0) return {};
  return first.substr(kRunIdPrefix.size());
}

}  // namespace astraflow
