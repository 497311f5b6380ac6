#pragma once
// The continuous engine (docs/rollout-backends.md, "The continuous engine"): sequences are
// submitted one by one and run together, up to `max_running` at a time; every step admits
// waiting sequences while slots and KV blocks allow (their prompts prefilled in one forward),
// then moves every running sequence on by one token (one decode forward). A sequence that ends
// leaves at once and frees its blocks for the next. KV memory is a pool of fixed-size blocks
// (src/rollout/kv_block_pool.hpp) sized by bytes, so it grows with live tokens, never with
// batch × longest; when the pool is full, admission waits, and a running sequence that needs a
// block takes the youngest one's (preempted: its blocks freed, recomputed when it comes back,
// its tokens so far kept). Sequences with one prompt share that prompt's blocks and its prefill
// (a GRPO group, pass@k samples). Each sequence draws from its own generator (its seed), so what
// it generates does not depend on what runs beside it. When the model's weights change under
// it (weightsChanged), every running sequence goes on under the new ones: its K/V is computed
// again with them before its next token, and each token records the version that sampled it.
// A multi-turn episode's next turn appends to its own blocks: a sequence asked to keep its K/V
// hands it to the one that continues it, which prefills only what was added since.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/rollout/sampling.hpp"
#include "astraflow/rollout/sequence_source.hpp"

namespace astraflow {

struct SchedulerOptions {
  int max_running = 64;             // sequences stepped together (rollout.max_running)
  std::int64_t kv_cache_bytes = 0;  // the block pool's size; 0: enough for max_running full contexts, at most
                                    // a quarter of the host's memory, or on CUDA kv_cache_fraction of the
                                    // device's free memory (rollout.kv_cache_bytes)
  int block_size = 16;              // token positions per block (rollout.kv_block_size)
  // Padded positions (rows × longest) one prefill forward may take; a longer single context
  // is prefilled alone (rollout.max_prefill_tokens).
  std::int64_t max_prefill_tokens = 4096;
  double kv_cache_fraction = 0.8;  // (rollout.kv_cache_fraction)
};

// What the scheduler did (counted since it was made).
struct SchedulerCounters {
  std::uint64_t steps = 0, prefill_forwards = 0, decode_forwards = 0;
  std::uint64_t prefill_tokens = 0;         // positions computed by prefill forwards (recomputation included)
  std::uint64_t shared_prompt_tokens = 0;   // prompt positions not prefilled: shared with a sequence of that prompt
  std::uint64_t decode_tokens = 0;          // rows of decode forwards
  std::uint64_t admission_waits = 0;        // steps where a waiting sequence had a slot but not the blocks
  std::uint64_t preemptions = 0;            // sequences whose blocks were taken (their work recomputed later)
  std::uint64_t recomputed_tokens = 0;      // positions prefilled again after a preemption
  std::uint64_t copied_blocks = 0;          // copy-on-write copies of a shared block's filled slots
  std::uint64_t version_changes = 0;        // weightsChanged calls
  std::uint64_t moved_sequences = 0;        // running sequences moved to new weights (their K/V recomputed)
  std::uint64_t reused_context_tokens = 0;  // positions a continuing sequence took from the one it continues
  std::uint64_t kept_dropped = 0;           // kept contexts dropped before being continued (pool, weights)
  std::uint64_t peak_running = 0;
  std::int64_t peak_kv_bytes = 0, kv_pool_bytes = 0;  // blocks in use at most, and the pool
};

class SequenceScheduler final : public SequenceSource {
 public:
  // Throws Error naming rollout.kv_cache_bytes when the pool cannot hold one full context.
  SequenceScheduler(PolicyModel model, std::int32_t pad_id, const SchedulerOptions& options);
  ~SequenceScheduler();
  SequenceScheduler(SequenceScheduler&&) noexcept;
  SequenceScheduler& operator=(SequenceScheduler&&) noexcept;

  // Queued; it ends in the FinishedSequence of a later step() (an empty prompt or one with no
  // room left in the context: with nothing generated, not stopped).
  SequenceId submit(SequenceRequest request) override;
  // One step (see above); returns the sequences that ended in it.
  std::vector<FinishedSequence> step() override;
  // The model now holds weight version `version` (its parameters were overwritten between two
  // steps). The tokens sampled from here record it; a running sequence keeps its tokens and has
  // its context prefilled again under the new weights (exact: as if it had run under them from
  // the start of its K/V), shared prompts are dropped. Counted in version_changes and
  // moved_sequences; the recomputation in recomputed_tokens.
  void weightsChanged(std::int64_t version) override;
  // Gives back what a keep_kv sequence kept (nothing when it was dropped or continued).
  void release(SequenceId id) override;
  std::int64_t weightVersion() const override;
  bool idle() const override;
  std::size_t running() const;
  std::size_t waiting() const;
  const SchedulerCounters& counters() const;
  std::int64_t kvBytesInUse() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow
