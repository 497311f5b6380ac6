// The generation engine: behaviour log-probs equal the trainer's log-probs for the same
// tokens, the KV cache does not change greedy output, stop tokens and max_new_tokens hold,
// seeds reproduce, NaN logits are flagged.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include <algorithm>
#include <iostream>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/rollout/generation.hpp"

using namespace astraflow;

namespace {

ModelConfig generationConfig() { return test_support::tinyModel(50, 32, 2, 4, 1, 64, 48); }

std::vector<std::vector<std::int32_t>> prompts() {
  return {{1, 5, 6, 7}, {1, 9}, {1, 10, 11, 12, 13, 14, 15}, {1, 20, 21}};
}

}  // namespace

TEST(Generation, BehaviourLogProbsMatchTrainingForward) {
  torch::manual_seed(11);
  PolicyModel model(generationConfig());
  GenerationEngine engine(model, 0);
  SamplingOptions o;
  o.temperature = 0.7;
  o.max_new_tokens = 12;
  auto gen = at::detail::createCPUGenerator(42);
  const auto out = engine.generate(prompts(), o, gen);

  // Rebuild prompt + generated as right-padded rows and score them like the trainer does.
  const auto P = prompts();
  std::int64_t T = 0;
  for (std::size_t i = 0; i < P.size(); ++i) T = std::max<std::int64_t>(T, P[i].size() + out[i].tokens.size());
  auto tokens = torch::zeros({4, T}, torch::kLong);
  auto lengths = torch::zeros({4}, torch::kLong);
  for (std::size_t i = 0; i < P.size(); ++i) {
    std::int64_t t = 0;
    for (auto x : P[i]) tokens[i][t++] = x;
    for (auto x : out[i].tokens) tokens[i][t++] = x;
    lengths[i] = t;
  }
  torch::NoGradGuard ng;
  const auto logp = sequenceLogProbs(*model, tokens, lengths, 0.7);
  double max_diff = 0;
  std::size_t compared = 0;
  for (std::size_t i = 0; i < P.size(); ++i) {
    ASSERT_FALSE(out[i].tokens.empty());
    for (std::size_t k = 0; k < out[i].tokens.size(); ++k) {
      const double trainer = logp[i][static_cast<std::int64_t>(P[i].size() + k)].item<double>();
      max_diff = std::max(max_diff, std::abs(trainer - out[i].logprobs[k]));
      ++compared;
    }
  }
  std::cout << "behaviour vs training log-prob max abs diff: " << max_diff << " over " << compared << " tokens\n";
  RecordProperty("behav_logprob_max_abs_diff", std::to_string(max_diff));
  EXPECT_LT(max_diff, 1e-4);
}

TEST(Generation, KvCacheDoesNotChangeGreedyOutput) {
  torch::manual_seed(12);
  PolicyModel model(generationConfig());
  GenerationEngine engine(model, 0);
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = 16;
  auto g1 = at::detail::createCPUGenerator(1), g2 = at::detail::createCPUGenerator(1);
  const auto cached = engine.generate(prompts(), o, g1);
  o.use_kv_cache = false;
  const auto full = engine.generate(prompts(), o, g2);
  for (std::size_t i = 0; i < cached.size(); ++i) {
    EXPECT_EQ(cached[i].tokens, full[i].tokens) << "row " << i;
    ASSERT_EQ(cached[i].logprobs.size(), full[i].logprobs.size());
    for (std::size_t k = 0; k < cached[i].logprobs.size(); ++k)
      EXPECT_NEAR(cached[i].logprobs[k], full[i].logprobs[k], 1e-4);
  }
}

TEST(Generation, StopTokensMaxTokensAndSeeds) {
  torch::manual_seed(13);
  PolicyModel model(generationConfig());
  GenerationEngine engine(model, 0);
  SamplingOptions o;
  o.max_new_tokens = 10;
  auto g1 = at::detail::createCPUGenerator(7), g2 = at::detail::createCPUGenerator(7);
  const auto a = engine.generate(prompts(), o, g1);
  const auto b = engine.generate(prompts(), o, g2);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "same seed, different tokens";
    EXPECT_LE(a[i].tokens.size(), 10u);
  }
  // Every token is a stop token: each row stops after exactly one token.
  SamplingOptions stop = o;
  for (std::int32_t t = 0; t < 50; ++t) stop.stop_token_ids.push_back(t);
  const auto s = engine.generate(prompts(), stop, g1);
  for (const auto& r : s) {
    EXPECT_EQ(r.tokens.size(), 1u);
    EXPECT_TRUE(r.stopped);
  }
  // With a minimum, the stop tokens cannot be drawn before it: every token but 7 stops, so the
  // first 4 tokens are 7 (with probability 1 under the masked distribution); only then may it stop.
  SamplingOptions at_least = o;
  for (std::int32_t t = 0; t < 50; ++t) {
    if (t != 7) at_least.stop_token_ids.push_back(t);
  }
  at_least.min_new_tokens = 4;
  for (const auto& r : engine.generate(prompts(), at_least, g1)) {
    ASSERT_GE(r.tokens.size(), 5u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.tokens[static_cast<std::size_t>(i)], 7);
    EXPECT_FLOAT_EQ(r.logprobs[0], 0.0f);  // log 1: the only token left
  }
  // top_p small enough keeps only the most likely token: same as greedy.
  SamplingOptions nucleus = o, greedy = o;
  nucleus.top_p = 1e-3;
  greedy.greedy = true;
  const auto n = engine.generate(prompts(), nucleus, g1);
  const auto gr = engine.generate(prompts(), greedy, g2);
  for (std::size_t i = 0; i < n.size(); ++i) EXPECT_EQ(n[i].tokens, gr[i].tokens);
  // The context limit bounds generation: a 44-token prompt leaves room for 4 tokens.
  std::vector<std::int32_t> longp(44, 5);
  const auto l = engine.generate({longp}, o, g1);
  EXPECT_LE(l[0].tokens.size(), 4u);
}

TEST(Generation, NonFiniteLogitsAreFlagged) {
  torch::manual_seed(14);
  ModelConfig m = generationConfig();
  m.tied_embeddings = false;  // a NaN row of a tied embedding would poison every row's logits
  PolicyModel model(m);
  {
    torch::NoGradGuard ng;
    model->orderedParameters().front().tensor[9].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  GenerationEngine engine(model, 0);
  SamplingOptions o;
  auto g = at::detail::createCPUGenerator(3);
  const auto out = engine.generate(prompts(), o, g);
  EXPECT_TRUE(out[1].nonfinite) << "row whose last prompt token has NaN embedding";
  EXPECT_TRUE(out[1].tokens.empty()) << "nothing may be generated from NaN logits";
  // A row is flagged exactly when token 9 (NaN embedding) is in its context.
  const auto P = prompts();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const bool has9 =
        std::count(P[i].begin(), P[i].end(), 9) + std::count(out[i].tokens.begin(), out[i].tokens.end(), 9) > 0;
    EXPECT_EQ(out[i].nonfinite, has9) << "row " << i;
  }
}
