#pragma once
// Rewards from programs that stay running (docs/tasks.md, "Your own verifier"): the persistent
// `command` reward (`persistent: true`) and the `http` reward. Both take the object the per-item
// command reads ({"prompt", "response", "reference", "metadata"}) and read the answer it writes
// (command_reward.hpp's commandVerdict), so one verifier serves all three ways.
//
// A persistent worker reads one JSON object per line on stdin and writes one answer per line on
// stdout. A pool holds `workers` of them, started when first needed; an item waits for a free
// one. A worker is started again after it crashes, times out, answers past the 1 MiB limit, or
// has answered `max_items` items. An item whose worker ended before answering is sent once more
// to a fresh worker (a worker that crashes every N items gives the rewards the per-item command
// gives); if that one ends too, the item's reason is `crashed`.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "astraflow/tasks/reward.hpp"

namespace astraflow {

struct RewardWorkerOptions {
  std::vector<std::string> argv;  // the program (looked up on PATH) and its arguments
  int workers = 1;                // processes (or, for http, connections) scoring at once
  double timeout_seconds = 30;    // per item
  std::uint64_t max_items = 0;    // a worker is started again after this many items; 0: never
};

// What a pool did, for the summary and `astraflow reward`.
struct RewardWorkerCounters {
  std::uint64_t items = 0;     // scored
  std::uint64_t started = 0;   // processes started (the first of each slot included)
  std::uint64_t restarts = 0;  // started again after a crash, a timeout, an over-long answer or max_items
  std::uint64_t crashed = 0;   // a worker ended before answering (the item resent once)
  std::uint64_t timeouts = 0;
  std::uint64_t invalid = 0;  // answers that were not one object with a finite reward
  RewardWorkerCounters& operator+=(const RewardWorkerCounters& o);
};

class RewardWorkerPool {
 public:
  // Throws Error when argv is empty or the program is not found (a configuration error).
  explicit RewardWorkerPool(RewardWorkerOptions options);
  ~RewardWorkerPool();
  RewardWorkerPool(const RewardWorkerPool&) = delete;
  RewardWorkerPool& operator=(const RewardWorkerPool&) = delete;

  // Safe from several threads; blocks while every worker is busy. Reward 0 with reason
  // `timeout`, `crashed` or `invalid` when the worker fails; throws Error only when the
  // program cannot be started at all.
  RewardResult score(const std::string& input_json);
  RewardWorkerCounters counters() const;
  const RewardWorkerOptions& options() const { return options_; }

 private:
  struct Slot;
  RewardResult scoreOn(Slot& slot, const std::string& input_json);

  RewardWorkerOptions options_;
  std::string executable_;
  mutable std::mutex mutex_;
  struct State;
  std::unique_ptr<State> state_;
};

// The process's pool for these options: environments are made per episode, so the pool of a
// rollout rank is found by its options (program, workers, timeout, max_items), made once.
std::shared_ptr<RewardWorkerPool> sharedRewardWorkerPool(const RewardWorkerOptions& options);

// Every shared pool's counters summed (a rollout rank's report).
RewardWorkerCounters sharedRewardWorkerCounters();

// The `http` reward: POST the object to `url` (http://host:port/path); the answer is the body.
// Up to `workers` requests at once, each on its own keep-alive connection. A transport error or
// a status other than 2xx is reason `crashed`, no answer within the timeout `timeout`, a body
// that is not an answer `invalid`.
struct HttpRewardOptions {
  std::string url;
  int workers = 1;
  double timeout_seconds = 30;
};

class HttpRewardPool {
 public:
  // Throws Error naming environment.reward.url when the URL is not http://host[:port][/path].
  explicit HttpRewardPool(HttpRewardOptions options);
  ~HttpRewardPool();
  HttpRewardPool(const HttpRewardPool&) = delete;
  HttpRewardPool& operator=(const HttpRewardPool&) = delete;

  RewardResult score(const std::string& input_json);
  RewardWorkerCounters counters() const;

 private:
  HttpRewardOptions options_;
  struct State;
  std::unique_ptr<State> state_;
};

std::shared_ptr<HttpRewardPool> sharedHttpRewardPool(const HttpRewardOptions& options);

}  // namespace astraflow
