#pragma once
// The memory plan (docs/memory.md): what every rank of a run will hold — weights by dtype,
// gradients, optimiser state, activations and logits at the configured micro-batch, the KV
// cache, weight-store windows and rings, the publishing copies — estimated from the config
// before anything is allocated, summed per node and compared with the node's memory. A plan
// past the node's memory is refused (run.memory_check) naming its largest items and the keys
// that shrink them; `astraflow plan CONFIG` prints it without running. Pure arithmetic and
// /proc reads: no MPI, no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"

namespace astraflow {

struct MemoryItem {
  std::string what;  // "AdamW state (fp32 m and v)"
  std::uint64_t bytes = 0;
  std::string shrink;  // the keys that make it smaller; empty when none does
  // Shared by the node's ranks (MPI shared windows: the store, the rings, the node's weight copy;
  // library code in the page cache): outside the rank's private resident set, which
  // docs/memory.md compares with the rest.
  bool shared = false;
};

struct RankMemoryPlan {
  int world_rank = 0;
  std::string label;  // "trainer:solver"
  std::vector<MemoryItem> items;
  std::uint64_t total() const;
  std::uint64_t privateTotal() const;  // less the shared items
};

// Every world rank of `map`'s plan. `vocab`: the tokenizer's vocabulary for policies whose
// model.vocab_size is 0; `host_bytes`: this machine's memory (an engine's automatic KV pool is a
// quarter of it, as the engine sizes it); `node_of`: each world rank's node (empty: all on one),
// so that a policy's node-shared copy is counted once per node, on its first rollout rank there.
std::vector<RankMemoryPlan> planMemory(const Config& cfg, const RoleMap& map, std::int64_t vocab,
                                       std::uint64_t host_bytes, const std::vector<int>& node_of = {});

// Memory the ranks of a node can count on: MemAvailable, or the cgroup's limit less its use when
// that is smaller (a Slurm job's allocation). What the run's own ranks already hold is added
// back by the caller (their plans include it).
struct NodeMemory {
  std::uint64_t available = 0;
  std::string source;  // "MemAvailable" or "cgroup memory.max"
};
NodeMemory nodeMemory();
std::uint64_t hostMemoryBytes();       // physical memory of this machine
std::uint64_t currentResidentBytes();  // this process's resident set (VmRSS)
std::uint64_t peakResidentBytes();     // its peak so far (VmHWM)

// The plan as one table per role (rank, item, bytes) with each rank's total, and the node's
// sum against `capacity`.
std::string formatMemoryPlan(const std::vector<RankMemoryPlan>& ranks, std::uint64_t capacity,
                             const std::string& capacity_source);

// Empty when the ranks fit in `capacity`; else the refusal: the need against the capacity, the
// largest items and the keys that shrink them, and run.memory_check to start anyway.
std::string memoryRefusal(const std::vector<RankMemoryPlan>& node_ranks, const std::string& node,
                          std::uint64_t capacity, const std::string& capacity_source);

std::string gib(std::uint64_t bytes);  // "1.23 GiB"

}  // namespace astraflow
