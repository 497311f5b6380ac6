#pragma once
// A trainer group's loop (docs/architecture.md, "Roles") and the ports it is given: the ring
// its batches arrive on (read by the group's first rank), the weight store it publishes into,
// and the group's own communicator for data parallelism. From here the dataflow layer is a
// stream of batches and the weight store a publication target.
#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/comm/role_context.hpp"
#include "astraflow/core/model_config.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/weights/weight_store.hpp"

namespace astraflow {

struct TrainerPorts {
  TrainerPorts(RoleContext c, const Comm& group_comm) : ctx(std::move(c)), group(group_comm) {}

  RoleContext ctx;
  const Comm& group;  // the policy's trainer ranks (collective steps, same order on all)
  std::string policy;
  RmaRing* batches = nullptr;    // popped by the group's rank 0; null on the others
  WeightStore* store = nullptr;  // staged into by rank 0
  TokenSpec tokens;              // the model's vocabulary and pad id (from the run's tokenizer)
  // run.export_hf_every: called on the group's rank 0 with each checkpoint file of a version
  // divisible by it (and the final one), to write it as a Hugging Face folder (run/hf_folders).
  std::function<void(const std::filesystem::path& checkpoint, std::int64_t version)> export_hf;
};

// Runs until the end-of-stream batch, then writes the final checkpoint.
TrainerReport runTrainerRole(const TrainerPorts& ports);

}  // namespace astraflow
