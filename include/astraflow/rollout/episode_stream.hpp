#pragma once
// Episodes one by one on a sequence source — the continuous engine, the simulated accelerator
// or a server's requests (docs/rollout-backends.md, "Rollout ranks per episode"): an episode's
// turn goes to the source when it starts, its next turn as soon
// as the environment has answered, and it ends when the environment says so. The caller starts
// episodes whenever it has room and steps the stream; nothing waits for a batch to end.
//
// With environment threads the environment's work — an episode's reset and its answer to each
// turn (a server's round trip, a tool call, a reward program) — runs on them, and the source goes
// on stepping the other episodes meanwhile; without, it runs in step() on the caller's thread.
// An episode's tokens are the same either way (its turns are seeded by the episode and turn).
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/sequence_source.hpp"

namespace astraflow {

struct EpisodeStreamCounters {
  std::uint64_t source_steps = 0;             // steps of the source with sequences running
  std::uint64_t source_steps_beside_env = 0;  // of those, while environment work was in flight
  std::uint64_t environment_jobs = 0;         // resets and turn answers run on the environment threads
};

class EpisodeStream {
 public:
  // `environment_threads` 0: the environment's work on the caller's thread, in start() and step().
  EpisodeStream(SequenceSource& source, const Tokenizer& tokenizer, const EnvironmentOptions& environment,
                int max_sequence_length, int environment_threads = 0);
  ~EpisodeStream();

  // Starts the episode of `problem_id`; its turns draw from generators seeded from `seed`.
  // `tag` comes back with the episode when it ends.
  void start(std::uint64_t problem_id, const SamplingOptions& sampling, std::uint64_t seed, std::uint64_t tag);
  // One scheduler step; the episodes that ended in it, with their tags. With environment threads
  // and no sequence running it waits (briefly) for the environment instead. An exception the
  // environment threw is thrown here.
  std::vector<std::pair<std::uint64_t, Episode>> step();
  // Episodes started and not ended: generating, or waiting for their environment.
  std::size_t active() const { return by_sequence_.size() + in_environment_.size(); }
  const EpisodeStreamCounters& counters() const { return counters_; }

 private:
  struct Running;
  class EnvironmentWork;
  void resetEpisode(Running& r, std::uint64_t problem_id) const;  // the environment's part of a start
  void submitTurn(Running& r);
  // After the environment answered a turn: the next turn goes to the source, or the episode ends.
  void afterTurn(std::unique_ptr<Running> r, std::vector<std::pair<std::uint64_t, Episode>>& ended);
  // The episodes whose environment work ended (waiting up to `wait_ms` for one when none has).
  void collect(int wait_ms, std::vector<std::pair<std::uint64_t, Episode>>& ended);

  SequenceSource& source_;
  const Tokenizer& tokenizer_;
  const EnvironmentOptions& environment_;
  int max_sequence_length_;
  std::unordered_map<SequenceId, std::unique_ptr<Running>> by_sequence_;   // an episode by its turn in flight
  std::unordered_map<Running*, std::unique_ptr<Running>> in_environment_;  // episodes the threads work on
  EpisodeStreamCounters counters_;
  std::unique_ptr<EnvironmentWork> work_;  // last: its threads stop before the episodes they use go
};

}  // namespace astraflow
