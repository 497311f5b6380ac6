#pragma once
// Agent episodes against an environment: the single- and multi-turn workflow of a RaaS
// rank. Policy tokens carry behaviour log-probs and mask 1; prompt and environment tokens
// carry mask 0 (never trained on).
#include <cstdint>
#include <string>
#include <vector>

#include "astraflow/model/training_sample.hpp"
#include "astraflow/rollout/generation.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

// An agent episode is a training sample: policy tokens with their behaviour log-probs (mask 1)
// between context tokens (mask 0), and the reward the environment gave.
using Episode = TrainingSample;

// Runs one episode per problem id, batching the generation of all unfinished episodes turn
// by turn. An episode whose generation failed (http backend) ends with `failed` set.
std::vector<Episode> runEpisodes(GenerationBackend& backend, const Tokenizer& tokenizer,
                                 const EnvironmentOptions& env_options, const std::vector<std::uint64_t>& problem_ids,
                                 const SamplingOptions& sampling);
// The same with the in-process engine and `generator`.
std::vector<Episode> runEpisodes(GenerationEngine& engine, const Tokenizer& tokenizer,
                                 const EnvironmentOptions& env_options, const std::vector<std::uint64_t>& problem_ids,
                                 const SamplingOptions& sampling, at::Generator& generator);

// The pieces of an episode, for runners that drive turns themselves (episode_stream.hpp):
// the episode's opening (the environment reset, its prompt), the ids that end a turn, the
// context limit, and one generated turn applied (true when the episode ended with it).
Episode startEpisode(const Tokenizer& tokenizer, Environment& env, std::uint64_t problem_id);
std::vector<std::int32_t> stopIds(const Tokenizer& tokenizer, const Environment& env);
std::size_t episodeContextLimit(int model_max_len, const Environment& env);
bool applyTurn(Episode& episode, Environment& env, const Generation& generation, const Tokenizer& tokenizer,
               const std::vector<std::int32_t>& stop_ids, std::size_t max_len);

// The episode a perfect agent produces (the environment's reference actions), for warm-start
// SFT: same token layout and masks as runEpisodes.
Episode referenceEpisode(const Tokenizer& tokenizer, const EnvironmentOptions& env_options, std::uint64_t problem_id);

}  // namespace astraflow
