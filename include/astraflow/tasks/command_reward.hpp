#pragma once
// The `command` reward (docs/tasks.md): the user's own verifier program, run as it is — not
// sandboxed, it is trusted — with the host's environment, in a process group of its own,
// killed at its timeout, always reaped. It reads one JSON object on stdin and answers one on
// stdout: {"reward": <finite number>, "reason": "<reason name>" (optional), "answer": "…"
// (optional)}.
#include <string>
#include <vector>

#include "astraflow/tasks/reward.hpp"

namespace astraflow {

struct CommandRewardOptions {
  std::vector<std::string> argv;  // the program (looked up on PATH) and its arguments
  double timeout_seconds = 30;
};

// `input_json` goes to the program's stdin as it is (the caller builds {"prompt", "response",
// "reference", "metadata"}). Reward 0 and reason `timeout` (killed at the timeout), `crashed`
// (non-zero exit or a signal) or `invalid` (stdout not one JSON object, no finite numeric
// "reward", an unknown "reason") when the program fails; never throws for that. Throws
// astraflow::Error when the program cannot be started at all (a configuration error).
RewardResult commandReward(const std::string& input_json, const CommandRewardOptions& options);

}  // namespace astraflow
