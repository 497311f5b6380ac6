#pragma once
// Names of the files in a run folder that more than one role writes or reads.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace astraflow {

// Checkpoint files of a run folder (docs/runtime-notes.md, "Checkpoints and resume"):
//   checkpoints/step_<V>.h5            dataflow state, config, version; links to the next two
//   checkpoints/step_<V>.<policy>.h5   trainer state of one policy (fp32 weights + AdamW state)
//   checkpoints/step_<V>.buffer.h5     trajectories held by the dataflow rank (trajectories.h5 layout)
std::filesystem::path checkpointPath(const std::filesystem::path& run_dir, std::int64_t version);
std::filesystem::path trainerCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version,
                                            const std::string& policy);
std::filesystem::path bufferCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version);
// The newest complete checkpoint's version (its dataflow file and every policy's trainer file
// exist), or -1 when there is none.
std::int64_t newestCheckpoint(const std::filesystem::path& run_dir, const std::vector<std::string>& policies);

}  // namespace astraflow
