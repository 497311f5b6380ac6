#pragma once
// The built-in generation engine: a batch of prompts through the continuous scheduler
// (sequence_scheduler.hpp: paged KV blocks, shared prompts, a row leaves when it ends), with
// temperature, top-p, stop tokens and max new tokens; returns the behaviour log-prob of every
// generated token. Seeded through the caller's generator, so a run is reproducible; each row
// draws from its own generator seeded from it, so a row's tokens do not depend on the others.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/rollout/sampling.hpp"
#include "astraflow/rollout/sequence_scheduler.hpp"

namespace astraflow {

struct Config;

// Per-row control of one generate() call (`astraflow serve` batches requests that each have
// their own limit and stop strings).
struct RowControl {
  std::vector<int> max_new_tokens;  // per row; empty: options.max_new_tokens for every row
  // After each token a row draws; false ends the row there (stopped, ended_by_caller).
  std::function<bool(std::size_t row, std::int32_t token, float logprob)> on_token;
};

class GenerationEngine {
 public:
  GenerationEngine(PolicyModel model, std::int32_t pad_id, const SchedulerOptions& scheduling = {});

  // Prompts of any lengths, run together on the scheduler (its block pool is made at the first
  // call and kept). Rows that would exceed the model's max_seq_len stop early (stopped = false).
  // options.use_kv_cache = false: generateStatic's full forward every step (a reference).
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options, at::Generator& generator,
                                   const RowControl& control = {});
  // The static batch engine this replaced, kept as the benchmarks' baseline and the tests'
  // reference: rows left-padded to the longest, a KV cache of rows × (longest + max new tokens),
  // every row stepped until the longest ends, one generator for the batch.
  std::vector<Generation> generateStatic(const std::vector<std::vector<std::int32_t>>& prompts,
                                         const SamplingOptions& options, at::Generator& generator,
                                         const RowControl& control = {});

  PolicyModel& model() { return model_; }
  // The scheduler generate() runs on (made at the first use), for callers that submit
  // sequences one by one (episode_stream.hpp).
  SequenceScheduler& scheduler();
  // Drops the scheduler and everything in it (made afresh at the next use): after a step that
  // threw, its sequences are not to be trusted.
  void resetScheduler() { scheduler_.reset(); }
  // The scheduler's counters (all zero before the first generate()).
  SchedulerCounters schedulerCounters() const;

 private:
  PolicyModel model_;
  std::int32_t pad_id_;
  SchedulerOptions scheduling_;
  std::unique_ptr<SequenceScheduler> scheduler_;
};

// The rollout section's sampling settings (temperature, top_p, max_new_tokens).
SamplingOptions samplingFrom(const Config& config);
// Its continuous-engine settings (max_running, kv_cache_bytes, kv_block_size, max_prefill_tokens).
SchedulerOptions schedulingFrom(const Config& config);

}  // namespace astraflow
