#pragma once
// A rollout pool with no model (layout[i].backend: {kind: simulated}; docs/simulation.md): each
// generation's length is drawn from the configured distribution, the rank sleeps the time a
// modelled accelerator would take (so hundreds of such ranks share a few cores), and the row
// comes back with synthetic token ids, log-probs and a reward drawn from the success rate. The
// rest of the runtime — rings, dataflow loop, weight store, trainer — runs as it does for real.
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "astraflow/rollout/sequence_source.hpp"

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

  // One row's plan: its length (the draw, cut to max_new_tokens and the context) and whether it
  // ends on the stop token (a row cut short does not: no stop, no reward).
  struct Row {
    int length = 0;
    bool stopped = false;
  };
  Row planRow(int prompt_tokens, const SamplingOptions& options);
  // A synthetic token (never one of never_generate) and its log-prob in [log 0.05, 0].
  std::int32_t drawToken();
  float drawLogprob();
  // A finished row's reward: 1 with the success rate at the version held, else 0.
  double drawReward();
  const SimulatedBackendSpec& spec() const { return spec_; }

  struct Stats {
    std::uint64_t generations = 0, tokens = 0;
    double modeled_seconds = 0;
  };
  const Stats& stats() const { return stats_; }
  Stats& stats() { return stats_; }

 private:
  SimulatedBackendSpec spec_;
  int max_sequence_length_;
  std::int32_t vocab_size_;
  std::vector<std::int32_t> never_generate_;
  std::mt19937_64 rng_;
  std::int64_t version_ = 0;
  Stats stats_;
};

// The simulated accelerator sequence by sequence, for a rank that works per episode
// (batching: continuous): up to batch_limit sequences in flight; each step admits waiting ones
// (their prompts at prefill_tokens_per_second), then decodes every one in flight together until
// the first of them ends or max_step_seconds of modelled time have passed, sleeping that long.
// A sequence that ends frees its slot for the next at once, as in a continuous-batching
// server. Each token records the version set by weightsChanged (a sequence moves to a new
// version at the next step, the on_new_version continue of an engine).
class SimulatedSequences final : public SequenceSource {
 public:
  // `backend` draws the lengths, tokens and rewards and counts them; it outlives this.
  explicit SimulatedSequences(SimulatedBackend& backend, double max_step_seconds = 0.05);
  SequenceId submit(SequenceRequest request) override;
  std::vector<FinishedSequence> step() override;
  void weightsChanged(std::int64_t version) override { version_ = version; }
  std::int64_t weightVersion() const override { return version_; }
  bool idle() const override { return waiting_.empty() && running_.empty(); }
  std::size_t running() const { return running_.size(); }

 private:
  struct Sequence {
    SequenceId id = 0;
    SequenceRequest request;
    SimulatedBackend::Row row;
    Generation generation;
  };
  // Moves a sequence on by one token; false when its caller ended it there.
  bool advance(Sequence& s);

  SimulatedBackend& backend_;
  double max_step_seconds_;
  std::deque<Sequence> waiting_;
  std::vector<Sequence> running_;
  std::vector<FinishedSequence> ended_at_submit_;  // sequences with nothing to generate
  SequenceId next_id_ = 1;
  std::int64_t version_ = -1;
};

}  // namespace astraflow
