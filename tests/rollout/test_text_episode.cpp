// Episodes of the `dataset` environment with a Hugging Face tokenizer: the prompt is the rendered
// chat encoded as it is (no <bos> added, the template's special tokens whole), the policy's tokens
// — its end-of-turn token included — are the only ones with mask 1, and every finished episode
// carries the reward function's reason.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/episode_stream.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"
#include "test_model_config.hpp"

using namespace astraflow;

namespace {

struct TextTask {
  test::TempDir dir;
  EnvironmentOptions options;

  TextTask() {
    std::filesystem::create_directories(dir.file("model"));
    writeByteLevelTokenizer(dir.file("model"));
    std::ofstream rows(dir.file("train.jsonl"));
    for (int i = 0; i < 8; ++i)
      rows << fmt::format(R"({{"prompt": "{} plus 2?", "answer": "{}", "solution": "{}+2=\\boxed{{{}}}"}})", i, i + 2,
                          i, i + 2)
           << "\n";
    options.name = "dataset";
    options.dataset.train_files = {dir.file("train.jsonl")};
    options.dataset.tokenizer_folders = {dir.file("model")};
  }
};

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(TextEpisode, ReferenceEpisodeIsTheChatWithTheSolutionTurn) {
  TextTask t;
  const auto tok = makeEnvironmentTokenizer(t.options);
  auto env = makeEnvironment(t.options);
  const std::uint64_t id = env->trainingId(0);
  const std::string prompt = env->reset(id);
  const std::vector<std::string> actions = env->referenceActions();
  ASSERT_EQ(actions.size(), 1u);
  const Episode e = referenceEpisode(*tok, t.options, id);

  const auto prompt_ids = tok->encode(prompt);
  const auto expected = concat(concat(prompt_ids, tok->encode(actions[0])), {tok->eosId()});
  EXPECT_EQ(e.tokens, expected);
  EXPECT_EQ(e.tokens.front(), *tok->tokenId("<|im_start|>"));  // no <bos>: the template has none
  ASSERT_EQ(e.policy_mask.size(), e.tokens.size());
  for (std::size_t i = 0; i < e.tokens.size(); ++i) EXPECT_EQ(e.policy_mask[i], i < prompt_ids.size() ? 0 : 1) << i;
  EXPECT_EQ(e.reward, 1.0);
}

TEST(TextEpisode, GeneratedEpisodesMaskOnlyThePolicyTokens) {
  TextTask t;
  const auto tok = makeEnvironmentTokenizer(t.options);
  torch::manual_seed(5);
  PolicyModel model(test_support::tinyModel(tok->vocabSize(), 32, 1, 2, 1, 64, 96));
  const TokenSpec spec = tokenSpecOf(*tok);
  model->setNeverGenerate({spec.pad_id});
  GenerationEngine engine(model, spec.pad_id);
  SamplingOptions sampling;
  sampling.max_new_tokens = 6;
  auto gen = at::detail::createCPUGenerator(3);
  auto env = makeEnvironment(t.options);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t k = 0; k < 4; ++k) ids.push_back(env->trainingId(k));
  const auto episodes = runEpisodes(engine, *tok, t.options, ids, sampling, gen);
  ASSERT_EQ(episodes.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Episode& e = episodes[i];
    const auto prompt_ids = tok->encode(env->reset(ids[i]));
    ASSERT_GT(e.tokens.size(), prompt_ids.size());
    EXPECT_TRUE(std::equal(prompt_ids.begin(), prompt_ids.end(), e.tokens.begin()));
    for (std::size_t p = 0; p < e.tokens.size(); ++p) EXPECT_EQ(e.policy_mask[p], p < prompt_ids.size() ? 0 : 1);
    EXPECT_EQ(e.turns, 1);
    // A random policy rarely answers; whatever it wrote, the reward function said why.
    EXPECT_TRUE(e.reward_reason == "no_answer" || e.reward_reason == "wrong" || e.reward_reason == "correct")
        << e.reward_reason;
  }
}

// Episodes run one by one on the continuous engine (episode_stream.hpp), started at different
// steps, are the episodes the batch runner makes (greedy, so the draws cannot differ).
TEST(TextEpisode, EpisodesStartedMidStreamAreTheBatchRunnersEpisodes) {
  TextTask t;
  const auto tok = makeEnvironmentTokenizer(t.options);
  torch::manual_seed(6);
  PolicyModel model(test_support::tinyModel(tok->vocabSize(), 32, 1, 2, 1, 64, 96));
  const TokenSpec spec = tokenSpecOf(*tok);
  model->setNeverGenerate({spec.pad_id});
  GenerationEngine engine(model, spec.pad_id, {2, 0, 8});
  SamplingOptions sampling;
  sampling.greedy = true;
  sampling.max_new_tokens = 9;
  auto gen = at::detail::createCPUGenerator(3);
  auto env = makeEnvironment(t.options);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t k = 0; k < 6; ++k) ids.push_back(env->trainingId(k));
  const auto batch = runEpisodes(engine, *tok, t.options, ids, sampling, gen);

  EpisodeStream stream(engine.scheduler(), *tok, t.options, model->config().max_seq_len);
  std::map<std::uint64_t, Episode> ended;
  std::size_t started = 0;
  for (int step = 0; ended.size() < ids.size(); ++step) {
    if (started < ids.size() && step % 3 == 0) {  // two episodes every third step
      for (int k = 0; k < 2; ++k, ++started) stream.start(ids[started], sampling, 11 + started, started);
    }
    for (auto& [tag, e] : stream.step()) ended.emplace(tag, std::move(e));
    ASSERT_LT(step, 1000);
  }
  EXPECT_EQ(stream.active(), 0u);
  EXPECT_GT(engine.schedulerCounters().prefill_forwards, 3u) << "episodes joined while others ran";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Episode& e = ended.at(i);
    EXPECT_EQ(e.tokens, batch[i].tokens) << "episode " << i;
    EXPECT_EQ(e.policy_mask, batch[i].policy_mask) << "episode " << i;
    EXPECT_EQ(e.reward, batch[i].reward) << "episode " << i;
    EXPECT_EQ(e.reward_reason, batch[i].reward_reason) << "episode " << i;
    ASSERT_EQ(e.behav_logprobs.size(), batch[i].behav_logprobs.size());
    for (std::size_t k = 0; k < e.behav_logprobs.size(); ++k)
      EXPECT_NEAR(e.behav_logprobs[k], batch[i].behav_logprobs[k], 1e-5);
  }
}

// Multi-turn episodes (the search environment: a turn without an answer gets an observation, up
// to max_turns) run one by one on the stream append each next turn to the previous turn's
// blocks, and end as the batch runner's episodes do (it prefills the whole history every turn) —
// with the environment's work on the caller's thread or on environment threads alike.
void multiTurnStreamMatchesTheBatchRunner(int environment_threads) {
  EnvironmentOptions options;
  options.name = "search";
  options.max_turns = 3;
  const auto tok = makeEnvironmentTokenizer(options);
  torch::manual_seed(7);
  PolicyModel model(test_support::tinyModel(tok->vocabSize(), 32, 1, 2, 1, 64, 128));
  model->setNeverGenerate({tokenSpecOf(*tok).pad_id});
  GenerationEngine batch_engine(model, tokenSpecOf(*tok).pad_id, {4, 0, 8}),
      stream_engine(model, tokenSpecOf(*tok).pad_id, {4, 0, 8});
  SamplingOptions sampling;
  sampling.greedy = true;
  sampling.max_new_tokens = 6;
  auto gen = at::detail::createCPUGenerator(3);
  auto env = makeEnvironment(options);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t k = 0; k < 5; ++k) ids.push_back(env->trainingId(k));
  const auto batch = runEpisodes(batch_engine, *tok, options, ids, sampling, gen);

  EpisodeStream stream(stream_engine.scheduler(), *tok, options, model->config().max_seq_len, environment_threads);
  for (std::size_t i = 0; i < ids.size(); ++i) stream.start(ids[i], sampling, 1 + i, i);
  std::map<std::uint64_t, Episode> ended;
  for (int step = 0; stream.active() > 0; ++step) {
    for (auto& [tag, e] : stream.step()) ended.emplace(tag, std::move(e));
    ASSERT_LT(step, 1000);
  }
  int later_turns = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Episode& e = ended.at(i);
    later_turns += e.turns - 1;
    EXPECT_EQ(e.tokens, batch[i].tokens) << "episode " << i;
    EXPECT_EQ(e.turns, batch[i].turns) << "episode " << i;
    ASSERT_EQ(e.behav_logprobs.size(), batch[i].behav_logprobs.size());
    for (std::size_t k = 0; k < e.behav_logprobs.size(); ++k)
      EXPECT_NEAR(e.behav_logprobs[k], batch[i].behav_logprobs[k], 1e-5);
  }
  ASSERT_GT(later_turns, 0) << "no episode had a second turn";
  const auto& s = stream_engine.schedulerCounters();
  EXPECT_GT(s.reused_context_tokens, 0u);
  EXPECT_LT(s.prefill_tokens, batch_engine.schedulerCounters().prefill_tokens);
  EXPECT_EQ(stream_engine.scheduler().kvBytesInUse(), 0) << "every kept context given back";
  // Every reset and every turn's answer ran on the threads when there are threads.
  const std::uint64_t turns = [&] {
    std::uint64_t n = 0;
    for (const auto& [tag, e] : ended) n += static_cast<std::uint64_t>(e.turns);
    return n;
  }();
  EXPECT_EQ(stream.counters().environment_jobs, environment_threads > 0 ? ids.size() + turns : 0u);
}

TEST(TextEpisode, AMultiTurnEpisodesNextTurnAppendsToItsOwnBlocks) { multiTurnStreamMatchesTheBatchRunner(0); }
TEST(TextEpisode, EnvironmentThreadsMakeTheSameEpisodes) { multiTurnStreamMatchesTheBatchRunner(3); }

// The environment's work on threads against a real server (examples/openenv_guess, written with
// openenv-core: each reset and answer a WebSocket round trip): the episodes are the ones the
// caller's thread makes, and the engine stepped other episodes while answers were awaited.
TEST(TextEpisode, EnvironmentThreadsStepTheEngineWhileAServerAnswers) {
  const char* python = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_OPENENV_EXAMPLE");
  ASSERT_TRUE(python != nullptr && script != nullptr) << "run under ctest";
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("model"));
  writeByteLevelTokenizer(dir.file("model"));
  EnvironmentOptions options;
  options.name = "openenv";
  options.max_turns = 4;
  options.dataset.tokenizer_folders = {dir.file("model")};
  options.openenv.command = {python, script, "--port", "{port}"};
  options.openenv.log_dir = dir.file("logs");
  options.openenv.reset_json = R"({"turns": 4})";
  options.openenv.observation_field = "prompt";
  const auto tok = makeEnvironmentTokenizer(options);
  torch::manual_seed(8);
  PolicyModel model(test_support::tinyModel(tok->vocabSize(), 32, 1, 2, 1, 64, 512));
  model->setNeverGenerate({tokenSpecOf(*tok).pad_id});
  SamplingOptions sampling;
  sampling.greedy = true;
  sampling.max_new_tokens = 4;
  struct Run {
    std::map<std::uint64_t, Episode> ended;
    EpisodeStreamCounters counters;
  };
  auto run = [&](int threads) {
    GenerationEngine engine(model, tokenSpecOf(*tok).pad_id, {8, 0, 8});
    EpisodeStream stream(engine.scheduler(), *tok, options, 512, threads);
    Run out;
    std::uint64_t started = 0;
    for (int step = 0; started < 8 || stream.active() > 0; ++step) {
      if (started < 8 && step % 2 == 0) {  // episodes join while others run and wait
        stream.start(started, sampling, 5 + started, started);
        ++started;
      }
      for (auto& [tag, e] : stream.step()) out.ended.emplace(tag, std::move(e));
      if (step > 100000) break;
    }
    out.counters = stream.counters();
    return out;
  };
  const Run inline_run = run(0), threaded = run(4);
  ASSERT_EQ(inline_run.ended.size(), 8u);
  ASSERT_EQ(threaded.ended.size(), 8u);
  for (std::uint64_t i = 0; i < 8; ++i) {
    const Episode &a = inline_run.ended.at(i), &b = threaded.ended.at(i);
    EXPECT_EQ(b.tokens, a.tokens) << "episode " << i;
    EXPECT_EQ(b.policy_mask, a.policy_mask) << "episode " << i;
    EXPECT_EQ(b.turns, a.turns) << "episode " << i;
    EXPECT_EQ(b.reward_reason, a.reward_reason) << "episode " << i;
    EXPECT_GT(a.turns, 1) << "the game answers turns";
  }
  EXPECT_EQ(inline_run.counters.source_steps_beside_env, 0u);
  EXPECT_GT(threaded.counters.source_steps_beside_env, 0u) << "the engine waited for every answer";
}
