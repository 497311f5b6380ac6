// The shared files of a run folder: checkpoint paths and which checkpoints are complete, the files a run owns
// (runFilesIn, and removeRunFiles for --overwrite), and the run id on the first line of config.yaml.
#include "astraflow/core/run_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
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

CheckpointRoom checkpointRoom(const fs::path& run_dir, std::uint64_t bytes) {
  std::error_code ec;
  const fs::path dir = checkpointPath(run_dir, 0).parent_path();
  fs::create_directories(dir, ec);
  const fs::path probe = dir / fmt::format(".room.{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return {false, fmt::format("{} cannot be written: {}", dir.string(), std::strerror(errno))};
  // fallocate(2) itself, not posix_fallocate: where the filesystem cannot reserve, glibc's
  // fallback would write `bytes` of zeros. Past a file-size limit (RLIMIT_FSIZE) the kernel also
  // sends SIGXFSZ, whose default ends the process: ignored for the reservation, so the limit
  // refuses the checkpoint instead.
  struct sigaction ignore = {};
  struct sigaction before = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &before);
  const int rc = ::fallocate(fd, 0, 0, static_cast<off_t>(std::min<std::uint64_t>(bytes, INT64_MAX)));
  const int err = rc == 0 ? 0 : errno;
  ::sigaction(SIGXFSZ, &before, nullptr);
  ::close(fd);
  fs::remove(probe, ec);
  if (rc == 0) return {};
  if (err != EOPNOTSUPP && err != ENOSYS)  // ENOSPC, EDQUOT (a quota), EFBIG (a file-size limit), ...
    return {false, fmt::format("{:.2f} GiB cannot be reserved in {}: {}", static_cast<double>(bytes) / (1 << 30),
                               dir.string(), std::strerror(err))};
  const auto space = fs::space(dir, ec);
  if (!ec && space.available < bytes)
    return {false,
            fmt::format("it needs up to {:.2f} GiB, {} has {:.2f} GiB free", static_cast<double>(bytes) / (1 << 30),
                        dir.string(), static_cast<double>(space.available) / (1 << 30))};
  return {};
}

std::vector<std::int64_t> pruneCheckpoints(const fs::path& run_dir, const std::vector<std::string>& policies, int keep,
                                           const std::vector<std::int64_t>& protect, std::int64_t protect_from) {
  const auto complete = completeCheckpoints(run_dir, policies);
  if (keep <= 0 || complete.size() <= static_cast<std::size_t>(keep)) return {};
  const std::int64_t oldest_kept = complete[static_cast<std::size_t>(keep) - 1];
  // Files by version: "step_<V>.<anything>" (the dataflow file, the buffer, each policy's file).
  std::map<std::int64_t, std::vector<fs::path>> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    const std::string name = entry.path().filename().string();
    std::int64_t v = -1;
    int consumed = 0;
    if (std::sscanf(name.c_str(), "step_%ld%n", &v, &consumed) != 1 || name[static_cast<std::size_t>(consumed)] != '.')
      continue;
    if (v < oldest_kept && v < protect_from && std::find(protect.begin(), protect.end(), v) == protect.end())
      files[v].push_back(entry.path());
  }
  std::vector<std::int64_t> removed;
  for (const auto& [v, paths] : files) {
    for (const auto& p : paths) fs::remove(p, ec);
    removed.push_back(v);
  }
  return removed;
}

std::int64_t newestCheckpoint(const fs::path& run_dir, const std::vector<std::string>& policies) {
  const auto versions = completeCheckpoints(run_dir, policies);
  return versions.empty() ? -1 : versions.front();
}

namespace {

constexpr std::array<const char*, 10> kRunFiles = {"config.yaml", "summary.json",  "trace.h5",    "trajectories.h5",
                                                   "eval.h5",     "trace",         "checkpoints", "hf",
                                                   "balance",     "served_weights"};
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
