// Agent episodes: startEpisode, applyTurn (a generated turn appended, the environment's answer as mask-0 tokens) and
// runEpisodes, which batches all unfinished episodes turn by turn; referenceEpisode builds warm-start SFT samples.
#include "astraflow/rollout/episode.hpp"

#include <algorithm>
#include <memory>

namespace astraflow {

namespace {

void pushToken(Episode& e, std::int32_t id, float logprob, std::uint8_t mask, std::int64_t version) {
  e.tokens.push_back(id);
  e.behav_logprobs.push_back(logprob);
  e.policy_mask.push_back(mask);
  e.token_versions.push_back(version);
}

void appendText(Episode& e, const Tokenizer& tok, const std::string& text) {
  for (auto id : tok.encode(text)) pushToken(e, id, 0.0f, 0, -1);
}

}  // namespace

std::vector<std::int32_t> stopIds(const Tokenizer& tok, const Environment& env) {
  std::vector<std::int32_t> ids{tok.eosId()};
  for (const auto& s : env.stopStrings()) {
    if (auto id = tok.tokenId(s)) ids.push_back(*id);
  }
  return ids;
}

Episode startEpisode(const Tokenizer& tok, Environment& env, std::uint64_t problem_id) {
  Episode e;
  e.problem_id = problem_id;
  const std::string prompt = env.reset(problem_id);
  if (!env.rendersWholeSequence()) pushToken(e, tok.bosId(), 0.0f, 0, -1);
  appendText(e, tok, prompt);
  return e;
}

std::vector<Episode> runEpisodes(GenerationEngine& engine, const Tokenizer& tok, const EnvironmentOptions& env_options,
                                 const std::vector<std::uint64_t>& problem_ids, const SamplingOptions& sampling,
                                 at::Generator& generator) {
  EngineBackend backend(engine, generator);
  return runEpisodes(backend, tok, env_options, problem_ids, sampling);
}

std::vector<Episode> runEpisodes(GenerationBackend& backend, const Tokenizer& tok,
                                 const EnvironmentOptions& env_options, const std::vector<std::uint64_t>& problem_ids,
                                 const SamplingOptions& sampling) {
  const std::size_t n = problem_ids.size();
  std::vector<std::unique_ptr<Environment>> envs;
  std::vector<Episode> episodes;
  for (auto id : problem_ids) {
    envs.push_back(makeEnvironment(env_options));
    episodes.push_back(startEpisode(tok, *envs.back(), id));
  }
  if (n == 0) return episodes;
  SamplingOptions opts = sampling;
  opts.stop_token_ids = stopIds(tok, *envs.front());
  const std::size_t max_len = episodeContextLimit(backend.maxSequenceLength(), *envs.front());
  std::vector<bool> done(n, false);
  for (int turn = 0; turn < envs.front()->maxTurns(); ++turn) {
    std::vector<std::size_t> active;
    std::vector<std::vector<std::int32_t>> prompts;
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      active.push_back(i);
      prompts.push_back(episodes[i].tokens);
    }
    if (active.empty()) break;
    auto gens = backend.generate(prompts, opts);
    for (std::size_t a = 0; a < active.size(); ++a) {
      done[active[a]] = applyTurn(episodes[active[a]], *envs[active[a]], gens[a], tok, opts.stop_token_ids, max_len);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!done[i]) episodes[i].truncated = true;
  }
  return episodes;
}

std::size_t episodeContextLimit(int model_max_len, const Environment& env) {
  std::size_t max_len = static_cast<std::size_t>(model_max_len);
  if (const int context = env.maxContextTokens(); context > 0)
    max_len = std::min(max_len, static_cast<std::size_t>(context));
  return max_len;
}

bool applyTurn(Episode& e, Environment& env, const Generation& g, const Tokenizer& tok,
               const std::vector<std::int32_t>& stop_ids, std::size_t max_len) {
  e.turns++;
  if (g.failed) {
    // Nothing half-formed goes on: the whole episode is returned, not trained on.
    e.failed = true;
    return true;
  }
  if (g.weight_version >= 0) {
    e.weight_version_min =
        e.weight_version_min < 0 ? g.weight_version : std::min(e.weight_version_min, g.weight_version);
    e.weight_version_max = std::max(e.weight_version_max, g.weight_version);
  }
  if (g.nonfinite) {
    e.nonfinite = true;
    return true;
  }
  if (g.tokens.empty()) {
    // No room left in the context: the episode ends unsolved, without an empty turn.
    e.truncated = true;
    return true;
  }
  const bool per_token = g.token_versions.size() == g.tokens.size();
  for (std::size_t t = 0; t < g.tokens.size(); ++t) {
    pushToken(e, g.tokens[t], g.logprobs[t], 1, per_token ? g.token_versions[t] : g.weight_version);
  }
  auto cut = [&] {
    e.truncated = true;
    e.tokens.resize(max_len);
    e.behav_logprobs.resize(max_len);
    e.policy_mask.resize(max_len);
    e.token_versions.resize(std::min(e.token_versions.size(), max_len));
    return true;
  };
  // Past the environment's context limit within the turn: ends unsolved, not scored.
  if (e.tokens.size() > max_len) return cut();
  if (g.reward) {  // simulated: the drawn verdict; a row cut short is unsolved, as a real one
    e.truncated = !g.stopped;
    e.reward = g.stopped ? *g.reward : 0.0;
    e.reward_reason = e.reward > 0 ? "correct" : "wrong";
    return true;
  }
  const StepResult r = env.step(tok.decode(g.tokens));
  if (r.done) {
    e.reward = r.reward;
    e.reward_reason = r.reason;
    return true;
  }
  // A chat turn cut at max_new_tokens has no end-of-turn token; the reply that follows must
  // start a new turn as the template would.
  if (env.rendersWholeSequence() && std::find(stop_ids.begin(), stop_ids.end(), g.tokens.back()) == stop_ids.end()) {
    pushToken(e, tok.eosId(), 0.0f, 0, -1);
  }
  appendText(e, tok, r.observation);
  // No room for another turn: the episode ends unsolved.
  if (e.tokens.size() >= max_len) return cut();
  return false;
}

Episode referenceEpisode(const Tokenizer& tok, const EnvironmentOptions& env_options, std::uint64_t problem_id) {
  auto env = makeEnvironment(env_options);
  Episode e = startEpisode(tok, *env, problem_id);
  const std::vector<std::int32_t> stops = stopIds(tok, *env);
  for (const auto& action : env->referenceActions()) {
    std::vector<std::int32_t> ids = tok.encode(action);
    // A turn ends as a generated one does: on a stop token (the end-of-sequence token where the
    // action has none of its own, as a chat turn's <|im_end|>).
    if (ids.empty() || std::find(stops.begin(), stops.end(), ids.back()) == stops.end()) ids.push_back(tok.eosId());
    for (auto id : ids) pushToken(e, id, 0.0f, 1, -1);
    e.turns++;
    const StepResult r = env->step(action);
    if (r.done) {
      e.reward = r.reward;
      break;
    }
    appendText(e, tok, r.observation);
  }
  return e;
}

}  // namespace astraflow
