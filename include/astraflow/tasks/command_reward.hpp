#pragma once
// The `command` reward (docs/tasks.md): the user's own verifier program, run as it is — not
// sandboxed, it is trusted — with the host's environment, in a process group of its own,
// killed at its timeout, always reaped. It reads one JSON object on stdin and answers one on
// stdout: {"reward": <finite number>, "reason": "<reason name>" (optional), "answer": "…"
// (optional)}.
#include <cstddef>
#include <string>
#include <vector>

#include "astraflow/tasks/reward.hpp"

namespace astraflow {

// A verifier answers one small object; more than this is not an answer (reason `invalid`).
inline constexpr std::size_t kCommandAnswerBytes = std::size_t{1} << 20;

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

// A verifier's answer read as a reward: one JSON object {"reward": <finite number>, "reason":
// "<reason name>"?, "answer": "…"?}; anything else is reward 0 with reason `invalid`. The
// persistent worker's lines and the http reward's bodies are read by it too.
RewardResult commandVerdict(const std::string& answer);

}  // namespace astraflow
