// Weights packed once for MKL's GEMM (model/packed_linear.cpp, rollout.prepacked_weights): a packed
// product equals torch::linear at every row count, stacked weights and biases included; a model
// with packing on gives the logits it gives without, follows its weights when a new version is
// copied in or swapped in, packs nothing under autograd, holds what the memory plan says; the
// continuous engine's greedy ids and log-probs are those without packing.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include "astraflow/core/error.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/model/prepacked_weights.hpp"
#include "astraflow/rollout/generation.hpp"
#include "model/packed_linear.hpp"

using namespace astraflow;
using model_detail::PackedLinear;

namespace {

// With attention biases, so the stacked q/k/v product carries them.
ModelConfig packedTestModel() {
  auto m = test_support::tinyModel(300, 64, 2, 4, 2, 160, 64);
  m.attention_bias = true;
  return m;
}

torch::Tensor packedTestForward(PolicyModel& model, const torch::Tensor& tokens) {
  const auto B = tokens.size(0), T = tokens.size(1);
  return model->forward(tokens, torch::arange(T, torch::kLong).expand({B, T}), torch::ones({B, T}, torch::kBool));
}

torch::Tensor packedTestLogits(PolicyModel& model, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  return packedTestForward(model, tokens);
}

}  // namespace

TEST(PackedLinear, EqualsLinearAtEveryRowCount) {
  if (!model_detail::packedGemmAvailable()) GTEST_SKIP() << "this LibTorch has no MKL";
  torch::manual_seed(5);
  const auto a = torch::randn({96, 80}), b = torch::randn({40, 80}), c = torch::randn({24, 80});
  const auto bias_a = torch::randn({96}), bias_c = torch::randn({24});
  const PackedLinear stacked({a, b, c}, {bias_a, torch::Tensor(), bias_c});
  const PackedLinear single({b}, {torch::Tensor()});
  EXPECT_GE(stacked.bytes(), static_cast<std::uint64_t>(160 * 80 * 4));
  for (std::int64_t m : {1, 3, 64, 200}) {
    const auto x = torch::randn({m, 80});
    const auto want = torch::cat({torch::linear(x, a, bias_a), torch::linear(x, b), torch::linear(x, c, bias_c)}, -1);
    EXPECT_TRUE(torch::allclose(stacked.apply(x), want, 1e-5, 1e-4)) << m << " rows";
    EXPECT_TRUE(torch::allclose(single.apply(x), torch::linear(x, b), 1e-5, 1e-4)) << m << " rows";
  }
  const auto x3 = torch::randn({2, 5, 80});  // [B,T,k] keeps its leading dimensions
  EXPECT_EQ(single.apply(x3).sizes(), (std::vector<std::int64_t>{2, 5, 40}));
  const auto mismatched = [&] { PackedLinear bad({a, torch::randn({8, 81})}, {torch::Tensor(), torch::Tensor()}); };
  EXPECT_THROW(mismatched(), Error);
}

TEST(PrepackedWeights, TheModelGivesTheSameLogitsAndFollowsNewWeights) {
  if (!model_detail::packedGemmAvailable()) GTEST_SKIP() << "this LibTorch has no MKL";
  torch::manual_seed(9);
  PolicyModel model(packedTestModel());
  const auto tokens = torch::randint(1, 300, {3, 17}, torch::kLong);
  const auto plain = packedTestLogits(model, tokens);
  model->setPrepackedWeights(true, /*min_elements=*/0);
  EXPECT_EQ(model->prepackedBytes(), 0u);  // made on first use
  const auto packed = packedTestLogits(model, tokens);
  EXPECT_TRUE(torch::allclose(packed, plain, 1e-5, 1e-4));
  EXPECT_EQ(model->prepackedBytes(), prepackedWeightBytes(packedTestModel(), 0));  // what the plan counts

  // A new version copied into the parameters (importTensors' way): the packed products follow.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  model->setPrepackedWeights(false);
  const auto plain2 = packedTestLogits(model, tokens);
  model->setPrepackedWeights(true, 0);
  packedTestLogits(model, tokens);  // packs the new weights
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.mul_(0.9);  // and changes them again, in place
  }
  model->setPrepackedWeights(false);
  const auto plain3 = packedTestLogits(model, tokens);
  model->setPrepackedWeights(true, 0);
  packedTestLogits(model, tokens);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.div_(0.9);  // back to plain2's weights
  }
  EXPECT_FALSE(torch::allclose(plain2, plain3, 1e-3, 1e-3));
  EXPECT_TRUE(torch::allclose(packedTestLogits(model, tokens), plain2, 1e-4, 1e-4));

  // A version swapped in under the same parameter objects (adoptTensors' set_data).
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.set_data(p.detach().clone() * 1.1);
  }
  const auto packed4 = packedTestLogits(model, tokens);
  model->setPrepackedWeights(false);
  EXPECT_TRUE(torch::allclose(packed4, packedTestLogits(model, tokens), 1e-5, 1e-4));
}

TEST(PrepackedWeights, AutogradAndSmallProductsAreLeftToLibTorch) {
  if (!model_detail::packedGemmAvailable()) GTEST_SKIP() << "this LibTorch has no MKL";
  PolicyModel model(packedTestModel());
  const auto tokens = torch::randint(1, 300, {2, 9}, torch::kLong);
  model->setPrepackedWeights(true, 0);
  packedTestForward(model, tokens).sum().backward();  // a training forward
  EXPECT_EQ(model->prepackedBytes(), 0u);
  model->setPrepackedWeights(true);  // the default floor: none of this model's products reaches it
  packedTestLogits(model, tokens);
  EXPECT_EQ(model->prepackedBytes(), 0u);
  EXPECT_EQ(prepackedWeightBytes(packedTestModel()), 0u);
}

TEST(PrepackedWeights, TheEngineGeneratesWhatItDoesUnpacked) {
  if (!model_detail::packedGemmAvailable()) GTEST_SKIP() << "this LibTorch has no MKL";
  torch::manual_seed(4);
  PolicyModel model(packedTestModel());
  model->eval();
  GenerationEngine engine(model, 0);
  std::vector<std::vector<std::int32_t>> prompts;
  for (int r = 0; r < 6; ++r) prompts.push_back({1, 5 + r, 40 + 3 * r, 7});
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = 12;
  auto gen = at::detail::createCPUGenerator(1);
  const auto plain = engine.generate(prompts, o, gen);
  model->setPrepackedWeights(true, 0);
  const auto packed = engine.generate(prompts, o, gen);
  EXPECT_GT(model->prepackedBytes(), 0u);
  ASSERT_EQ(packed.size(), plain.size());
  for (std::size_t r = 0; r < plain.size(); ++r) {
    EXPECT_EQ(packed[r].tokens, plain[r].tokens) << "row " << r;
    ASSERT_EQ(packed[r].logprobs.size(), plain[r].logprobs.size());
    for (std::size_t k = 0; k < plain[r].logprobs.size(); ++k)
      EXPECT_NEAR(packed[r].logprobs[k], plain[r].logprobs[k], 1e-5);
  }
}
