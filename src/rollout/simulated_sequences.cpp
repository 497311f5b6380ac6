// The simulated accelerator sequence by sequence (docs/simulation.md, "Ranks per episode").
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "astraflow/rollout/simulated_backend.hpp"

namespace astraflow {

SimulatedSequences::SimulatedSequences(SimulatedBackend& backend, double max_step_seconds)
    : backend_(backend), max_step_seconds_(max_step_seconds) {}

SequenceId SimulatedSequences::submit(SequenceRequest request) {
  Sequence s;
  s.id = next_id_++;
  s.row = backend_.planRow(static_cast<int>(request.prompt.size()), request.options);
  s.request = std::move(request);
  ++backend_.stats().generations;
  if (s.row.length == 0) {
    // No room in the context: nothing to generate, not stopped (as the engine ends it).
    FinishedSequence f{s.id, {}};
    f.generation.stopped = s.row.stopped;
    if (s.row.stopped) f.generation.reward = backend_.drawReward();
    ended_at_submit_.push_back(std::move(f));
    return s.id;
  }
  waiting_.push_back(std::move(s));
  return waiting_.back().id;
}

bool SimulatedSequences::advance(Sequence& s) {
  Generation& g = s.generation;
  const bool last = static_cast<int>(g.tokens.size()) + 1 == s.row.length;
  const std::int32_t token = last && s.row.stopped ? s.request.options.stop_token_ids.front() : backend_.drawToken();
  const float logprob = backend_.drawLogprob();
  g.tokens.push_back(token);
  g.logprobs.push_back(logprob);
  g.token_versions.push_back(version_);
  ++backend_.stats().tokens;
  if (s.request.on_token && !s.request.on_token(token, logprob)) {
    g.ended_by_caller = g.stopped = true;
    return false;
  }
  return true;
}

std::vector<FinishedSequence> SimulatedSequences::step() {
  std::vector<FinishedSequence> ended = std::move(ended_at_submit_);
  ended_at_submit_.clear();
  const auto& spec = backend_.spec();
  double seconds = 0;
  while (running_.size() < static_cast<std::size_t>(spec.batch_limit) && !waiting_.empty()) {
    seconds += static_cast<double>(waiting_.front().request.prompt.size()) / spec.prefill_tokens_per_second;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  int steps = 0;
  if (!running_.empty()) {
    const double step_seconds =
        (1.0 + spec.batch_slowdown * static_cast<double>(running_.size() - 1)) / spec.decode_tokens_per_second;
    int shortest = std::numeric_limits<int>::max();
    for (const auto& s : running_) {
      shortest = std::min(shortest, s.row.length - static_cast<int>(s.generation.tokens.size()));
    }
    // Every sequence in flight gains a token per decode step: until the first ends, at most
    // max_step_seconds of modelled time, so that the rank takes new tasks and versions between.
    steps = std::clamp(static_cast<int>(max_step_seconds_ / step_seconds), 1, shortest);
    seconds += steps * step_seconds;
  }
  backend_.stats().modeled_seconds += seconds;
  // A timed sleep: the rank waits as an accelerator-bound one would, using no CPU.
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  for (auto it = running_.begin(); it != running_.end();) {
    bool running = true;
    for (int t = 0; t < steps && running; ++t) running = advance(*it);
    Generation& g = it->generation;
    if (running && static_cast<int>(g.tokens.size()) < it->row.length) {
      ++it;
      continue;
    }
    if (running && it->row.stopped) {
      g.stopped = true;
      g.reward = backend_.drawReward();
    }
    ended.push_back({it->id, std::move(g)});
    it = running_.erase(it);
  }
  return ended;
}

}  // namespace astraflow
