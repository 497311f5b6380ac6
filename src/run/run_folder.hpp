#pragma once
// One run per output folder (docs/runtime-notes.md, "One run per folder"): the dataflow rank's
// check before a fresh run writes anything, and its choice of the checkpoint --resume takes.
// Private to src/run.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace astraflow::run_detail {

// Why a fresh run may not start in `run_dir` (it holds another run's files), naming the folder,
// what is there and the ways on; empty when it may. With `overwrite` the other run's files are
// removed first (core/run_files.hpp: removeRunFiles) and the answer is empty.
std::string refuseUsedFolder(const std::filesystem::path& run_dir, bool overwrite);

struct ResumePoint {
  std::int64_t version = -1;  // -1: nothing to resume from
  std::string run_id;         // the folder's run
  std::string message;        // which checkpoint was taken and what was passed over, or why none
};

// The newest complete checkpoint of the folder's own run: every file of it (dataflow, buffer,
// each policy's trainer) carries the run id of the folder's config.yaml. A run from before
// run ids (no id in its config) takes checkpoints that carry none.
ResumePoint checkpointToResume(const std::filesystem::path& run_dir, const std::vector<std::string>& policies);

}  // namespace astraflow::run_detail
