#pragma once
// Episodes one by one on a sequence source — the continuous engine, the simulated accelerator
// or a server's requests (docs/rollout-backends.md, "Rollout ranks per episode"): an episode's
// turn goes to the source when it starts, its next turn as soon
// as the environment has answered, and it ends when the environment says so. The caller starts
// episodes whenever it has room and steps the stream; nothing waits for a batch to end.
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/sequence_source.hpp"

namespace astraflow {

class EpisodeStream {
 public:
  EpisodeStream(SequenceSource& source, const Tokenizer& tokenizer, const EnvironmentOptions& environment,
                int max_sequence_length);
  ~EpisodeStream();

  // Starts the episode of `problem_id`; its turns draw from generators seeded from `seed`.
  // `tag` comes back with the episode when it ends.
  void start(std::uint64_t problem_id, const SamplingOptions& sampling, std::uint64_t seed, std::uint64_t tag);
  // One scheduler step; the episodes that ended in it, with their tags.
  std::vector<std::pair<std::uint64_t, Episode>> step();
  std::size_t active() const { return by_sequence_.size(); }

 private:
  struct Running;
  void submitTurn(Running& r);

  SequenceSource& source_;
  const Tokenizer& tokenizer_;
  const EnvironmentOptions& environment_;
  int max_sequence_length_;
  std::unordered_map<SequenceId, std::unique_ptr<Running>> by_sequence_;  // an episode by its turn in flight
};

}  // namespace astraflow
