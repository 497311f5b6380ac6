#pragma once
// The dataflow rank's part of a checkpoint (docs/architecture.md §10): counters, prompt-source cursor,
// evaluation so far, the config used, and the trajectories it holds. Written by the dataflow
// rank alone (one writer per HDF5 file); the trainers write their own files next to it.
//
//   checkpoints/step_<V>.h5
//     attributes  format = "astraflow-checkpoint", part = "dataflow", version = V, config (YAML text),
//                 trainer_files (names of the policies' files), buffer_file
//     /dataflow   attributes next_problem, next_task_id, next_group_id, eval_rounds,
//                 eval_accuracy_start, eval_best_version, eval_best_mean (run.keep_best; older
//                 checkpoints have none: no best yet), wall_seconds
//     /dataflow/counters/<policy>  attributes produced, filtered, filtered_nonfinite,
//                 filtered_error, stale_dropped, consumed, replayed, batches
//     /dataflow/plugins/<key>  one-row string dataset: the plug-in's state; its counters as
//                 attributes (admitted, skipped, kept, dropped, replayed, errors)
//   checkpoints/step_<V>.buffer.h5   the held trajectories, in the trajectories.h5 layout
// Each file is written under a temporary name and renamed, so a file that exists is complete.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/records.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/dataflow/plugins.hpp"

namespace astraflow {

// A plug-in's checkpointed state: its key, its opaque state text and its counters.
struct PluginSnapshot {
  std::string key;
  std::string state;
  PluginCounters counters;
};

struct DataflowSnapshot {
  std::string run_id;  // the folder's run, stamped on the dataflow and buffer files
  std::int64_t version = 0;
  std::uint64_t next_problem = 0;
  std::uint64_t next_task_id = 0;
  std::uint64_t next_group_id = 0;
  std::int64_t eval_rounds = 0;
  double eval_accuracy_start = -1;      // −1: not measured
  std::int64_t eval_best_version = -1;  // the best round so far; −1: none
  double eval_best_mean = -1;
  double wall_seconds = 0;                                          // run time before this checkpoint (all segments)
  std::vector<std::pair<std::string, AssemblerCounters>> counters;  // per policy
  std::vector<Trajectory> held;
  std::string config_text;
  std::vector<PluginSnapshot> plugins;
};

// Writes step_<V>.h5 and step_<V>.buffer.h5; returns the bytes written.
std::uint64_t writeDataflowCheckpoint(const std::filesystem::path& run_dir, const DataflowSnapshot& snapshot,
                                      const std::vector<std::string>& policies);

// Reads them back. A missing, truncated or foreign file is refused with an Error naming the
// file and the dataset or attribute that failed.
DataflowSnapshot readDataflowCheckpoint(const std::filesystem::path& run_dir, std::int64_t version);

}  // namespace astraflow
