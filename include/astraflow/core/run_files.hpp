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
//   checkpoints/best.<policy>.h5       run.keep_best: the best evaluated version's trainer file, and
//   checkpoints/best.json              which version that is, with its scores
std::filesystem::path checkpointPath(const std::filesystem::path& run_dir, std::int64_t version);
std::filesystem::path trainerCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version,
                                            const std::string& policy);
std::filesystem::path bufferCheckpointPath(const std::filesystem::path& run_dir, std::int64_t version);
// The newest complete checkpoint's version (its dataflow file and every policy's trainer file
// exist), or -1 when there is none.
std::int64_t newestCheckpoint(const std::filesystem::path& run_dir, const std::vector<std::string>& policies);
// The versions of every complete checkpoint, newest first.
std::vector<std::int64_t> completeCheckpoints(const std::filesystem::path& run_dir,
                                              const std::vector<std::string>& policies);
// run.keep_checkpoints: removes the files of every checkpoint older than the `keep` newest
// complete ones (its dataflow, buffer and trainer files; a version's partial leftovers too), except
// the versions in `protect` (the best evaluated one, under run.keep_best) and those at or after
// `protect_from` (evaluations still running may yet make one of them the best). Never touches the
// newest complete checkpoint, anything newer than it (a checkpoint being written), best.* or
// other files. `keep` <= 0: nothing is removed. Returns the versions removed, oldest first.
std::vector<std::int64_t> pruneCheckpoints(const std::filesystem::path& run_dir,
                                           const std::vector<std::string>& policies, int keep,
                                           const std::vector<std::int64_t>& protect, std::int64_t protect_from);
// Whether `bytes` can be written into the run's checkpoints/ folder (made when missing) now: the
// space is reserved (fallocate of a scratch file there, released at once), so what the free-space
// figure cannot show — a quota, a file-size limit, a filesystem's own cap — refuses too; where the
// filesystem cannot reserve, its free space is compared. The trainer and the dataflow rank skip a
// checkpoint that would not fit rather than have HDF5 fail part-way through it
// (docs/runtime-notes.md). `why` says what refused.
struct CheckpointRoom {
  bool fits = true;
  std::string why;
};
CheckpointRoom checkpointRoom(const std::filesystem::path& run_dir, std::uint64_t bytes);

// One run per folder (docs/runtime-notes.md, "One run per folder"). What a run writes into its
// folder: config.yaml, summary.json, trace.h5, trajectories.h5, eval.h5 and the folders trace/,
// checkpoints/, hf/, balance/, served_weights/. The warm start `astraflow sft` writes (sft.h5) is
// not a run's, nor is anything else a user keeps there.
std::vector<std::filesystem::path> runFilesIn(const std::filesystem::path& run_dir);
// Removes them (`run --overwrite`); what is not a run's file stays.
void removeRunFiles(const std::filesystem::path& run_dir);

// A new run's id: its UTC start and 32 random bits, e.g. "20261203T081502Z-9f3ac2e1". It is the
// first line of the run's config.yaml and an attribute of its traces and every checkpoint file,
// so --resume takes only the checkpoints of the folder's own run.
std::string newRunId();
// "# astraflow run_id: <id>": the line written before the config text.
std::string runIdLine(const std::string& id);
// The id on the first line of <run_dir>/config.yaml; empty when it has none (a run from before
// run ids, or no config).
std::string runIdOf(const std::filesystem::path& run_dir);

}  // namespace astraflow
