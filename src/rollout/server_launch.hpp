#pragma once
// Inference servers a pool starts itself (layout[i].backend.launch; docs/rollout-backends.md,
// "Servers the pool starts"): the arguments of each start and the ManagedServer options of one
// policy's server. Private to src/rollout.
#include <functional>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/tasks/managed_server.hpp"

namespace astraflow::rollout_detail {

// One start's program and arguments: launch.command with "{port}", "{model}" (the folder) and
// "{local_rank}" replaced, then the flags the api needs that the command does not give (nor
// place through {model}, {port}) — vllm: --model, --port, --host 127.0.0.1, --logprobs-mode
// processed_logprobs; sglang: --model-path, --port, --host 127.0.0.1; openai: none (its command
// names {port} and {model}).
std::vector<std::string> launchArguments(const RolloutBackendSpec& spec, int port, const std::string& folder,
                                         int local_rank);
// Its environment: launch.env with "{local_rank}" replaced, and VLLM_SERVER_DEV_MODE=1 for vllm
// (the weight-update endpoints) unless the command's env sets it.
std::vector<std::pair<std::string, std::string>> launchEnvironment(const RolloutBackendSpec& spec, int local_rank);
// This process's index among its node's ranks, as Open MPI, MPICH/Hydra or Slurm tell it; 0 when
// none does.
int localRankFromEnvironment();
// The options of `policy`'s server in pool `pool` (layout index): each start begins from
// `folder()` (the newest version written for the server). Ranks of a node share it with per: node.
ManagedServerOptions launchOptions(const RolloutBackendSpec& spec, int pool, const std::string& policy,
                                   const std::string& log_dir, std::function<std::string()> folder);

}  // namespace astraflow::rollout_detail
