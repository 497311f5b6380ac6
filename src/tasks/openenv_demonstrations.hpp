#pragma once
// Demonstrations for an OpenEnv environment's warm start (environment.openenv.demonstrations,
// docs/tasks.md): a server knows no solutions, so `astraflow sft` plays the turns a user wrote
// down, one JSONL row per game — {"seed": 3, "actions": ["8", "12", "10"]} — against the server
// itself, and trains on them. Private to src/tasks.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace astraflow::detail {

struct OpenEnvDemonstrations {
  std::map<std::uint64_t, std::vector<std::string>> actions;  // by reset seed
  std::vector<std::uint64_t> seeds;                           // the keys, in order
};

// The file's demonstrations, read once per process. Throws Error naming the file when it cannot
// be read or has no usable row; a row whose seed is held out (≥ eval_seed_start: training on a
// held-out game would leak it), a seed given twice, or a row without a non-empty list of strings
// is skipped and counted in one warning with its line.
std::shared_ptr<const OpenEnvDemonstrations> sharedDemonstrations(const std::string& file,
                                                                  std::uint64_t eval_seed_start);

}  // namespace astraflow::detail
