// One run per output folder (run_folder.hpp).
#include "run/run_folder.hpp"

#include <fmt/format.h>

#include "astraflow/core/run_files.hpp"
#include "astraflow/io/h5.hpp"

namespace astraflow::run_detail {

namespace fs = std::filesystem;

std::string refuseUsedFolder(const fs::path& run_dir, bool overwrite) {
  const auto present = runFilesIn(run_dir);
  if (present.empty()) return {};
  if (overwrite) {
    removeRunFiles(run_dir);
    return {};
  }
  std::string names;
  for (const auto& p : present) names += (names.empty() ? "" : ", ") + p.filename().string();
  const std::string id = runIdOf(run_dir);
  return fmt::format(
      "run.output_dir {} already holds a run{} ({}); a new run would mix its files with that one's. Continue it "
      "with `astraflow run --resume {}`, start over with `astraflow run --overwrite` (removes that run's "
      "checkpoints, traces and trajectories first), or set another run.output_dir",
      run_dir.string(), id.empty() ? "" : fmt::format(" ({})", id), names, run_dir.string());
}

namespace {

// Whether `path` carries `run_id` ("" for a file of a run from before run ids); `other` is the
// id it carries. Throws H5Error, naming the file, when it cannot be read.
bool carries(const fs::path& path, const std::string& run_id, std::string& other) {
  other = io::H5File::runIdOf(path.string());
  return other == run_id;
}

}  // namespace

ResumePoint checkpointToResume(const fs::path& run_dir, const std::vector<std::string>& policies) {
  ResumePoint point;
  point.run_id = runIdOf(run_dir);
  std::vector<std::string> passed;
  for (const std::int64_t v : completeCheckpoints(run_dir, policies)) {
    std::vector<fs::path> files{checkpointPath(run_dir, v), bufferCheckpointPath(run_dir, v)};
    for (const auto& p : policies) files.push_back(trainerCheckpointPath(run_dir, v, p));
    std::string other;
    bool ours = true;
    try {
      for (const auto& f : files) ours = ours && carries(f, point.run_id, other);
    } catch (const std::exception& e) {
      // A damaged checkpoint is refused, naming the file, rather than passed over for an older
      // one: the user decides whether to remove it (docs/runtime-notes.md).
      point.message = fmt::format("a checkpoint file cannot be read: {}", e.what());
      return point;
    }
    if (!ours) {
      passed.push_back(fmt::format("step_{} ({})", v, other.empty() ? "no run id" : other));
      continue;
    }
    point.version = v;
    point.message = fmt::format("run {} resumes from {}", point.run_id.empty() ? "(from before run ids)" : point.run_id,
                                checkpointPath(run_dir, v).string());
    break;
  }
  std::string skipped;
  for (const auto& p : passed) skipped += (skipped.empty() ? "" : ", ") + p;
  if (point.version < 0) {
    point.message =
        fmt::format("no complete checkpoint of this folder's run{} in {}{}",
                    point.run_id.empty() ? "" : fmt::format(" ({})", point.run_id), (run_dir / "checkpoints").string(),
                    skipped.empty() ? "" : fmt::format("; passed over, of another run: {}", skipped));
  } else if (!skipped.empty()) {
    point.message += fmt::format("; passed over newer checkpoints of another run: {}", skipped);
  }
  return point;
}

}  // namespace astraflow::run_detail
