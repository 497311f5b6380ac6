#pragma once
// What generates sequences one by one (docs/rollout-backends.md, "Rollout ranks per episode"):
// the continuous engine (sequence_scheduler.hpp), a simulated accelerator
// (simulated_backend.hpp) and an external server's requests in flight (generation_backend.hpp).
// A caller submits sequences whenever it has room and steps the source; each step hands back
// the sequences that ended in it. Episodes on a rollout rank (episode_stream.hpp) run on any of
// them, so every backend keeps its slots busy the same way.
#include <cstdint>
#include <functional>
#include <vector>

#include "astraflow/rollout/sampling.hpp"

namespace astraflow {

struct SequenceRequest {
  std::vector<std::int32_t> prompt;
  SamplingOptions options;  // options.max_new_tokens is this sequence's limit
  std::uint64_t seed = 0;   // its generator's seed
  // After each token; false ends the sequence there (stopped, ended_by_caller).
  std::function<bool(std::int32_t token, float logprob)> on_token;
  // Keep its K/V when it ends, for a later sequence that continues it (`continues`); the caller
  // takes it up or gives it back (release). Kept K/V counts in the pool and is dropped, oldest
  // first, when a sequence needs the blocks, and at a weight change.
  bool keep_kv = false;
  // The ended sequence (kept with keep_kv) whose context this prompt extends: its positions are
  // not prefilled again. Ignored when nothing is kept for it or the prompt does not start with
  // its context.
  std::uint64_t continues = 0;
};

using SequenceId = std::uint64_t;

struct FinishedSequence {
  SequenceId id = 0;
  Generation generation;
};

class SequenceSource {
 public:
  virtual ~SequenceSource() = default;
  // Queued; it ends in the FinishedSequence of a later step().
  virtual SequenceId submit(SequenceRequest request) = 0;
  // Moves the sequences on (how far is the source's: one token for the engine, a stretch of
  // modelled time for the simulator, until a request answers for a server); returns those that
  // ended.
  virtual std::vector<FinishedSequence> step() = 0;
  // The weights generating from the next step are `version`; each token records the version
  // that sampled it.
  virtual void weightsChanged(std::int64_t version) = 0;
  virtual std::int64_t weightVersion() const = 0;
  // Gives back what a keep_kv sequence kept (nothing where the source keeps nothing).
  virtual void release(SequenceId /*id*/) {}
  // Nothing waiting or running.
  virtual bool idle() const = 0;
};

}  // namespace astraflow
