// run.keep_best: after every trainer has written its last checkpoint, the dataflow rank keeps the
// trainer checkpoint of the best evaluated version as checkpoints/best.<policy>.h5 and says which
// version it is in checkpoints/best.json (docs/runtime-notes.md, "Checkpoints and resume").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "astraflow/core/error.hpp"
#include "astraflow/core/run_files.hpp"
#include "run/summary.hpp"

namespace astraflow::run_detail {

namespace fs = std::filesystem;

namespace {

// A hard link where the filesystem allows one (no bytes copied: a trainer file of an 8B policy
// with its AdamW state is ~100 GB), else a copy written beside and renamed into place.
void linkOrCopy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove(to, ec);  // an earlier segment's best (a resumed run)
  fs::create_hard_link(from, to, ec);
  if (!ec) return;
  const fs::path tmp = fs::path(to).concat(".tmp");
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

}  // namespace

nlohmann::json keepBestCheckpoint(const Config& cfg, const fs::path& run_dir, const nlohmann::json& summary) {
  const auto& version = summary.at("eval_best_version");
  if (version.is_null()) {
    spdlog::warn("run.keep_best: no evaluation round at one version > 0 finished; no best checkpoint kept");
    return nullptr;
  }
  const std::int64_t v = version.get<std::int64_t>();
  nlohmann::json best = {
      {"version", v}, {"mean_accuracy", summary.at("eval_best_mean")}, {"files", nlohmann::json::object()}};
  for (const auto& p : cfg.policies) {
    const fs::path from = trainerCheckpointPath(run_dir, v, p.name);
    const fs::path to = run_dir / "checkpoints" / fmt::format("best.{}.h5", p.name);
    try {
      if (!fs::exists(from)) throw Error(fmt::format("{} does not exist (skipped for want of room?)", from.string()));
      linkOrCopy(from, to);
      best["files"][p.name] = to.filename().string();
    } catch (const std::exception& e) {
      spdlog::error("run.keep_best: policy '{}' of version {}: {}", p.name, v, e.what());
      best["files"][p.name] = nullptr;
    }
  }
  std::ofstream(run_dir / "checkpoints" / "best.json") << best.dump(2) << "\n";
  spdlog::info("run.keep_best: version {} (mean accuracy {:.3f}) kept as checkpoints/best.<policy>.h5", v,
               summary.at("eval_best_mean").is_null() ? -1.0 : summary.at("eval_best_mean").get<double>());
  return best;
}

}  // namespace astraflow::run_detail
