#pragma once
// A rollout pool with no model (layout[i].backend: {kind: simulated}; docs/simulation.md): each
// generation's length is drawn from the configured distribution, the rank sleeps the time a
// modelled accelerator would take (so hundreds of such ranks share a few cores), and the row
// comes back with synthetic token ids, log-probs and a reward drawn from the success rate. The
// rest of the runtime — rings, dataflow loop, weight store, trainer — runs as it does for real.
#include <cstdint>
#include <random>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/rollout/generation_backend.hpp"

namespace astraflow {

class SimulatedBackend final : public GenerationBackend {
 public:
  // `vocab_size` and `never_generate`: the ids its synthetic tokens come from and avoid.
  SimulatedBackend(const SimulatedBackendSpec& spec, int max_sequence_length, std::int32_t vocab_size,
                   std::vector<std::int32_t> never_generate, std::uint64_t seed);

  // Rows end on options.stop_token_ids.front() (stopped, a drawn reward) unless their drawn
  // length passes max_new_tokens or the context, where they are cut (not stopped, no reward).
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                   const SamplingOptions& options) override;
  int maxSequenceLength() const override { return max_sequence_length_; }

  // The weight version the rank holds: the lengths' growth and the success rate follow it.
  void setVersion(std::int64_t version) { version_ = version; }
  // One draw of the length distribution at the current version (before any cap).
  int drawLength();
  double successRate() const;

  // Seconds the modelled accelerator takes for one call. Each prompt costs its tokens at
  // prefill_tokens_per_second; each decode step of k sequences together costs
  // (1 + batch_slowdown × (k − 1)) / decode_tokens_per_second. Continuous batching: sequences
  // enter in order, at most batch_limit in flight, and one that ends frees its slot. Static: the
  // rows go in chunks of batch_limit, each stepping until its longest row ends.
  static double modeledSeconds(const SimulatedBackendSpec& spec, const std::vector<int>& prompt_tokens,
                               const std::vector<int>& new_tokens);

  struct Stats {
    std::uint64_t generations = 0, tokens = 0;
    double modeled_seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  SimulatedBackendSpec spec_;
  int max_sequence_length_;
  std::int32_t vocab_size_;
  std::vector<std::int32_t> never_generate_;
  std::mt19937_64 rng_;
  std::int64_t version_ = 0;
  Stats stats_;
};

}  // namespace astraflow
