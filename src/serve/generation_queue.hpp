#pragma once
// The batching core of `astraflow serve`: requests wait in one queue and a worker thread runs
// them through the engine together — every pending request that samples the same way (same
// temperature, top-p, greedy flag and stop tokens), up to `max_batch` rows, in one generate()
// call, each row with its own token limit. Weight updates run on the same thread between
// batches, so a batch never sees two versions. Private to src/serve.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
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
  std::uint64_t requests = 0, batches = 0, rows = 0, generated_tokens = 0, weight_updates = 0, aborted = 0;
  std::uint64_t largest_batch = 0;
};

class GenerationQueue {
 public:
  // `batch_wait`: how long a batch waits, after its first request, for more to arrive (clients
  // that send together are generated together; a lone request pays at most this much).
  GenerationQueue(GenerationEngine engine, int max_batch, std::chrono::microseconds batch_wait, std::uint64_t seed,
                  std::string weight_version);
  ~GenerationQueue();  // finishes the batch in progress, aborts the waiting requests, joins
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  std::future<QueuedResult> submit(QueuedRequest request);
  // Loads `folder`'s safetensors into the model between two batches; waits for it. Returns "" or
  // what was wrong (the model keeps its old weights then: loading checks every tensor first).
  std::string updateWeights(const std::filesystem::path& folder, const std::string& weight_version);
  std::string weightVersion() const;
  QueueStats stats() const;
  // SGLang's /pause_generation: no new batch starts until resume(); with `abort`, the batch
  // running now ends at its next token and its requests finish as aborted (their clients retry).
  void pause(bool abort);
  void resume();
  const ModelConfig& modelConfig() const { return config_; }

 private:
  struct Pending {
    QueuedRequest request;
    std::promise<QueuedResult> promise;
  };
  struct Update {
    std::filesystem::path folder;
    std::string version;
    std::promise<std::string> promise;
  };
  void work();
  void runBatch(std::vector<Pending>& batch);

  GenerationEngine engine_;
  ModelConfig config_;
  int max_batch_;
  std::chrono::microseconds batch_wait_;
  at::Generator generator_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::deque<Update> updates_;
  std::string weight_version_;
  QueueStats stats_;
  std::chrono::steady_clock::time_point last_trim_{};  // the worker's last malloc_trim (at most one a second)
  bool stopping_ = false;
  bool paused_ = false;
  std::atomic<bool> abort_running_{false};
  std::thread worker_;
};

}  // namespace astraflow::serve_detail
