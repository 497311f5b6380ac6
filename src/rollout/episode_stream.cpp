// EpisodeStream: episodes run one by one on a SequenceSource, each turn submitted as soon as the environment has
// answered the last (its K/V kept for the next), and handed back with their tags as they end.
#include "astraflow/rollout/episode_stream.hpp"

namespace astraflow {

struct EpisodeStream::Running {
  std::uint64_t tag = 0;
  std::unique_ptr<Environment> env;
  Episode episode;
  SamplingOptions options;
  std::uint64_t seed = 0;
  std::size_t max_len = 0;
  SequenceId last_turn = 0;  // its turn before this one: its K/V kept for this one to extend
};

EpisodeStream::EpisodeStream(SequenceSource& source, const Tokenizer& tokenizer, const EnvironmentOptions& environment,
                             int max_sequence_length)
    : source_(source), tokenizer_(tokenizer), environment_(environment), max_sequence_length_(max_sequence_length) {}

EpisodeStream::~EpisodeStream() = default;

void EpisodeStream::start(std::uint64_t problem_id, const SamplingOptions& sampling, std::uint64_t seed,
                          std::uint64_t tag) {
  auto r = std::make_unique<Running>();
  r->tag = tag;
  r->env = makeEnvironment(environment_);
  r->episode = startEpisode(tokenizer_, *r->env, problem_id);
  r->options = sampling;
  r->options.stop_token_ids = stopIds(tokenizer_, *r->env);
  r->seed = seed;
  r->max_len = episodeContextLimit(max_sequence_length_, *r->env);
  submitTurn(*r.release());
}

void EpisodeStream::submitTurn(Running& r) {
  SequenceRequest request;
  request.prompt = r.episode.tokens;
  request.options = r.options;
  // A fresh stream per turn, fixed by the episode's seed and the turn's number.
  request.seed = r.seed ^ (0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(r.episode.turns) + 1));
  // The next turn (if one can follow) appends to this one's blocks instead of prefilling the
  // history again.
  request.keep_kv = r.episode.turns + 1 < r.env->maxTurns();
  request.continues = r.last_turn;
  r.last_turn = source_.submit(std::move(request));
  by_sequence_[r.last_turn].reset(&r);
}

std::vector<std::pair<std::uint64_t, Episode>> EpisodeStream::step() {
  std::vector<std::pair<std::uint64_t, Episode>> ended;
  for (auto& f : source_.step()) {
    auto it = by_sequence_.find(f.id);
    if (it == by_sequence_.end()) continue;  // another user's sequence on a shared scheduler
    std::unique_ptr<Running> r = std::move(it->second);
    by_sequence_.erase(it);
    const bool done = applyTurn(r->episode, *r->env, f.generation, tokenizer_, r->options.stop_token_ids, r->max_len);
    if (!done && r->episode.turns < r->env->maxTurns()) {
      submitTurn(*r.release());
      continue;
    }
    if (!done) r->episode.truncated = true;  // out of turns
    source_.release(r->last_turn);           // no turn continues it
    ended.emplace_back(r->tag, std::move(r->episode));
  }
  return ended;
}

}  // namespace astraflow
