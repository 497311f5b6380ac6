#pragma once
// A trainer group's part of a checkpoint (docs/architecture.md §10), written by the group's rank 0:
//   checkpoints/step_<V>.<policy>.h5
//     attributes  format = "astraflow-checkpoint", part = "trainer", policy, version = V
//     /policies/<policy>/weights/<tensor>               fp32 (the master weights, not bf16)
//     /policies/<policy>/optimizer/<tensor>/exp_avg     fp32, flattened like the weights
//     /policies/<policy>/optimizer/<tensor>/exp_avg_sq  fp32; attribute step on the group
// Written under a temporary name and renamed: a file that exists is complete.
#include <cstdint>
#include <string>

namespace astraflow {

class PolicyTrainer;

// Returns the bytes written. Sharded (trainer.sharding: optimizer or parameters), every rank of
// the group calls it (rank 0 gathers each sharded weight and each parameter's state from the
// shards and writes the same format); otherwise rank 0 alone. Loading takes each rank's piece.
// `run_id`, when given, is stamped on the file (core/run_files.hpp: --resume takes only its run's).
std::uint64_t saveTrainerCheckpoint(const std::string& path, const std::string& policy, PolicyTrainer& trainer,
                                    std::int64_t version, const std::string& run_id = {});

// An upper bound of the file saveTrainerCheckpoint would write now: fp32 weights, the AdamW state
// once a step is taken, and HDF5's per-dataset overhead. The trainer skips a checkpoint its
// filesystem cannot hold (a write that fails part-way would abort the rank; docs/runtime-notes.md).
std::uint64_t trainerCheckpointBytes(PolicyTrainer& trainer);

// Loads weights and optimiser state; returns the version. A missing, truncated or foreign file,
// or a tensor that does not match the config's model, is refused with an Error naming the file
// and the dataset.
std::int64_t loadTrainerCheckpoint(const std::string& path, const std::string& policy, PolicyTrainer& trainer);

}  // namespace astraflow
