#include "astraflow/core/run_files.hpp"

#include <fmt/format.h>

#include <cstdio>

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

std::int64_t newestCheckpoint(const fs::path& run_dir, const std::vector<std::string>& policies) {
  std::int64_t best = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    const std::string name = entry.path().filename().string();
    std::int64_t v = -1;
    char tail[8] = {0};
    // Exactly "step_<V>.h5": the dataflow file of a checkpoint.
    if (std::sscanf(name.c_str(), "step_%ld%7s", &v, tail) != 2 || std::string(tail) != ".h5") continue;
    if (v <= best) continue;
    bool complete = fs::exists(bufferCheckpointPath(run_dir, v));
    for (const auto& p : policies) complete = complete && fs::exists(trainerCheckpointPath(run_dir, v, p));
    if (complete) best = v;
  }
  return best;
}

}  // namespace astraflow
