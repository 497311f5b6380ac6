#pragma once
// The core of `astraflow serve`: a worker thread steps the engine's continuous scheduler
// (rollout/sequence_scheduler.hpp) and every request joins it at the next step — each with its
// own sampling, limit and generator, up to `max_batch` running at once — and leaves as soon as it
// ends, so a long request never holds up a short one; tokens reach the request's hook (streaming)
// as they are drawn. A weight update waits for the running requests to end and starts none
// meanwhile, so no answer sees two versions. Private to src/serve.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "astraflow/rollout/generation.hpp"

namespace astraflow::serve_detail {

enum class Finish { Stop, Length, Abort };
const char* finishName(Finish f);  // "stop", "length", "abort"

struct QueuedResult;

struct QueuedRequest {
  std::vector<std::int32_t> prompt;
  SamplingOptions sampling;  // max_new_tokens is this request's own limit
  // After each drawn token; false ends the request there as stopped (a stop string matched, or
  // the streaming client went away). May be empty.
  std::function<bool(std::int32_t token, float logprob)> on_token;
  // Called once with the result just before the future is ready (streaming ends its choice).
  std::function<void(const QueuedResult&)> on_done;
};

struct QueuedResult {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;  // log π(token) under the temperature-scaled distribution
  Finish finish = Finish::Length;
  bool matched_stop_token = false;  // ended on one of sampling.stop_token_ids (the last token)
  bool nonfinite = false;           // the logits held NaN/inf (finish = Abort)
  std::string weight_version;       // the version that generated every token
};

struct QueueStats {
  std::uint64_t requests = 0, generated_tokens = 0, weight_updates = 0, aborted = 0;
  std::uint64_t steps = 0, rows = 0;  // scheduler steps, and the running requests they stepped
  std::uint64_t most_running = 0;     // requests running together at most
};

class GenerationQueue {
 public:
  // `batch_wait`: with nothing running, how long the first request waits for more to arrive
  // (requests sent together are prefilled in one forward; a lone request pays at most this much).
  GenerationQueue(GenerationEngine engine, int max_batch, std::chrono::microseconds batch_wait, std::uint64_t seed,
                  std::string weight_version);
  ~GenerationQueue();  // finishes the batch in progress, aborts the waiting requests, joins
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  std::future<QueuedResult> submit(QueuedRequest request);
  // Loads `folder`'s safetensors into the model once no request runs; waits for it. Returns "" or
  // what was wrong (the model keeps its old weights then: loading checks every tensor first).
  std::string updateWeights(const std::filesystem::path& folder, const std::string& weight_version);
  std::string weightVersion() const;
  QueueStats stats() const;
  // SGLang's /pause_generation: no request starts until resume(); with `abort`, the requests
  // running now end at their next token and finish as aborted with what they made (their
  // clients resume or retry).
  void pause(bool abort);
  void resume();
  const ModelConfig& modelConfig() const { return config_; }

 private:
  struct Pending {
    QueuedRequest request;
    std::promise<QueuedResult> promise;
    std::uint64_t abort_epoch = 0;  // abort_epoch_ when it started: a later pause(abort) cuts it
    bool cut = false;               // ended by pause(abort)
  };
  struct Update {
    std::filesystem::path folder;
    std::string version;
    std::promise<std::string> promise;
  };
  void work();
  // Under the lock: waits for work; the update to apply now, or the requests to start.
  bool next(std::unique_lock<std::mutex>& lock, std::optional<Update>& update, std::vector<Pending>& starting);
  void applyUpdate(Update& update);
  void start(Pending pending);
  void step();
  void finish(Pending& p, Generation& g);

  GenerationEngine engine_;
  ModelConfig config_;
  int max_batch_;
  std::chrono::microseconds batch_wait_;
  std::mt19937_64 seeds_;                                             // each request's generator seed, in arrival order
  std::unordered_map<SequenceId, std::unique_ptr<Pending>> running_;  // the worker's only
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::deque<Update> updates_;
  std::string weight_version_;
  QueueStats stats_;
  std::chrono::steady_clock::time_point last_trim_{};  // the worker's last malloc_trim (at most one a second)
  bool stopping_ = false;
  bool paused_ = false;
  std::atomic<std::uint64_t> abort_epoch_{0};  // pause(abort) calls
  std::thread worker_;
};

}  // namespace astraflow::serve_detail
