#pragma once
// OpenEnv environments (docs/tasks.md, "OpenEnv environments"): `environment.name: openenv`
// plays each episode as one session on an OpenEnv server's WebSocket endpoint /ws — a `reset`
// with the episode's seed, then a `step` per policy turn — so many episodes run against one
// server without sharing state. The server is a running one (`url`) or one each rollout rank
// starts, health-checks and, when it dies, starts again (`command`). The environment itself is
// made through the registry (environment.hpp); this header is for reports and tools.
#include <cstdint>
#include <string>

namespace astraflow {

struct OpenEnvCounters {
  std::uint64_t sessions = 0;   // WebSocket sessions opened (one per episode, one more after a failure)
  std::uint64_t steps = 0;      // resets and steps answered with an observation
  std::uint64_t errors = 0;     // resets and steps that failed: connection, the server's error reply, malformed
  std::uint64_t timeouts = 0;   // of those, past environment.openenv.timeout_seconds
  std::uint64_t malformed = 0;  // of those, a reply that was not an OpenEnv message
  std::uint64_t restarts = 0;   // started servers started again after they ended
};

// Every server of this process summed (a rollout rank's report, `astraflow env check`); `errors`
// includes the resets that found no server (it would not start).
OpenEnvCounters sharedOpenEnvCounters();

// Why this process's OpenEnv server can never start (its program cannot run: a missing or
// non-executable environment.openenv.command), or empty. A rollout rank leaves its pool on it.
std::string openEnvUnavailable();

}  // namespace astraflow
