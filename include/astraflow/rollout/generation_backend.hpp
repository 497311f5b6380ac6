#pragma once
// Where a rollout rank's tokens come from (layout[i].backend, docs/rollout-backends.md): the
// in-process engine, or an external inference server over HTTP (SGLang's /generate, an
// OpenAI-style /v1/completions, or vLLM's). Episodes, workflows, rewards and trajectories are the same for
// both: a backend takes token-id prompts and returns token ids with their behaviour log-probs.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/rollout/generation.hpp"

namespace astraflow {

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  // One generation per prompt, in order. A row the backend could not produce has `failed` set
  // and no tokens (its task goes back, never into a trajectory).
  virtual std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                           const SamplingOptions& options) = 0;
  // The longest sequence (prompt + generated) the model takes.
  virtual int maxSequenceLength() const = 0;
};

// The in-process engine with this rank's generator.
class EngineBackend final : public GenerationBackend {
 public:
  EngineBackend(GenerationEngine& engine, at::Generator& generator) : engine_(engine), generator_(generator) {}
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options) override {
    return engine_.generate(prompts, options, generator_);
  }
  int maxSequenceLength() const override { return engine_.model()->config().max_seq_len; }

 private:
  GenerationEngine& engine_;
  at::Generator& generator_;
};

// What an http backend counts (the rank's report carries them into summary.json).
struct HttpBackendStats {
  std::uint64_t requests = 0;          // answered requests
  std::uint64_t retries = 0;           // requests sent again after a failure
  std::uint64_t failed = 0;            // rows given up after the retries
  std::uint64_t transport_errors = 0;  // refused, reset, timed out
  std::uint64_t http_errors = 0;       // non-2xx answers
  std::uint64_t malformed = 0;         // bodies that were not the API's shape (bad JSON, short or non-finite log-probs)
  std::uint64_t weight_updates = 0;    // versions the server confirmed loading
  std::uint64_t weight_update_failures = 0;
  std::uint64_t resumed = 0;         // aborted requests sent again from the tokens made (update_mode abort)
  std::uint64_t resumed_tokens = 0;  // tokens those aborts had made, kept
  // Prompt positions of answered requests, and those the server said it took from its prefix
  // cache (counted over the answers that say; `cache_reports` of them).
  std::uint64_t prompt_tokens = 0, cached_prompt_tokens = 0, cache_reports = 0;
  double request_seconds = 0;  // summed over requests (they overlap)
  double weight_write_seconds = 0, weight_load_seconds = 0;
};

class PolicyModelImpl;
struct HttpResult;

namespace rollout_detail {
struct Attempt;
}

// An external server. `rank_in_pool` picks its url (urls[rank % size]). Requests of one
// generate() call run concurrently, at most backend.max_in_flight at a time. `never_generate`:
// the ids the policy gives probability 0 (<pad>, <bos>, ids past its tokenizer): every request
// bans them (`logit_bias` of -100, the OpenAI API's ban), and an answer holding one is refused.
class HttpBackend final : public GenerationBackend {
 public:
  HttpBackend(const RolloutBackendSpec& spec, int rank_in_pool, int max_sequence_length,
              std::vector<std::int32_t> never_generate = {});
  ~HttpBackend() override;
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options) override;
  int maxSequenceLength() const override { return max_sequence_length_; }

  // Asks the server to load the folder as `version` (SGLang's /update_weights_from_disk or the
  // configured endpoint; vLLM's reload_weights); true once it confirmed. Retries as requests do.
  bool loadWeights(const std::string& folder, std::int64_t version);
  // Updates the server answered with a refusal since it last confirmed one (an unreachable
  // server's are not counted), and the last refusal: the call and the server's answer.
  int updatesRefusedInRow() const;
  std::string lastRefusal() const;
  // The server answers /health now.
  bool healthy();
  // Seconds since the server last answered anything (0 while it answers).
  double unreachableSeconds() const;
  std::string url() const;
  // The server moved (a launched server started again on another port): weight updates go to
  // `url` from here on, and requests too when `requests` (a server started again takes requests
  // only once it loaded the version its rank holds: it starts from other weights). It counts as
  // reachable again.
  void redirect(const std::string& url, bool requests = true);
  const HttpBackendStats& stats() const { return stats_; }

 private:
  friend class HttpSequences;  // sends requests one by one on the clients 1 … max_in_flight
  // openai: asks the server for the model id once (requests name it); while no request is in flight.
  void learnModel();
  int maxInFlight() const;
  // One row: its request with retries, resumed after an abort from the tokens it made.
  Generation request(std::size_t client, const std::vector<std::int32_t>& prompt, const SamplingOptions& options);
  // One try at a request body: the answer parsed and checked, the counters updated.
  rollout_detail::Attempt attempt(std::size_t client, const std::string& body, int index);
  bool loadWeightsOnce(const std::string& path, const std::string& body, std::int64_t version,
                       std::chrono::steady_clock::time_point t0);
  bool control(const std::string& path, const std::string& body, bool counts);
  void refused(const std::string& path, const HttpResult& r);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  int max_sequence_length_;
  HttpBackendStats stats_;
  int refused_in_row_ = 0;    // guarded by Impl::mutex
  std::string last_refusal_;  // guarded by Impl::mutex
};

// An http pool rank's requests one by one, for a rank that works per episode
// (docs/rollout-backends.md, "Rollout ranks per episode"): up to backend.max_in_flight requests
// in flight, each on its own thread and connection; a sequence submitted goes out as soon as one
// is free, and step() hands back those answered (a failed one with `failed` set), waiting a
// little when none has. A short request never waits for a long one. The server reports the
// version each answer came from, so weightsChanged only records the version held.
class HttpSequences final : public SequenceSource {
 public:
  explicit HttpSequences(HttpBackend& backend, std::chrono::milliseconds wait = std::chrono::milliseconds(20));
  ~HttpSequences() override;  // after the requests in flight have ended
  HttpSequences(const HttpSequences&) = delete;
  HttpSequences& operator=(const HttpSequences&) = delete;

  SequenceId submit(SequenceRequest request) override;
  std::vector<FinishedSequence> step() override;
  void weightsChanged(std::int64_t version) override { version_ = version; }
  std::int64_t weightVersion() const override { return version_; }
  bool idle() const override;
  // Submitted and not yet handed back by step().
  std::size_t outstanding() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t version_ = -1;
};

}  // namespace astraflow
