// Token log-probs computed in chunks of rows from hidden states (model/chunked_logprobs.cpp)
// against the whole-vocabulary computation — one [N,V] float32 logits tensor, log-softmax,
// gather, autograd's backward — on Qwen3's 151,936-token vocabulary: values and the gradients
// of the hidden states and of the output weight, with never-generated ids and a temperature; and
// the model's sequenceLogProbs (which takes the chunked path) against log-probs taken from its
// full [B,T,V] logits, for an untied and a tied output head, under float32 and bf16 autocast; and
// the parameter count the memory plan computes from a config against the built model.
// Values agree within 1e-6. Gradients sum 151,936 terms in float32, which no two summation orders
// do within 1e-6 of each other (the whole computation is itself ~1e-5 off the float64 result), so
// the gradients are held to the float64 result: the chunked ones at least as close as the whole.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include <limits>

#include "test_model_config.hpp"

#include "astraflow/model/chunked_logprobs.hpp"
#include "astraflow/model/policy_model.hpp"

using namespace astraflow;

namespace {

constexpr std::int64_t kQwenVocab = 151936;

torch::Tensor wholeLogProbs(const torch::Tensor& hidden, const torch::Tensor& targets, const OutputHead& head) {
  // float32 as the model computes them; a float64 reference stays float64.
  auto logits = torch::linear(hidden, head.weight);
  if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);
  if (head.never_generate.defined())
    logits = logits.index_fill(-1, head.never_generate, -std::numeric_limits<float>::infinity());
  return (logits / head.temperature).log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// `got` as close to the float64 `exact` as `whole` is (the summation order may differ; with a
// margin of a quarter of whole's error and 1e-7 of the scale), and within 1e-5 of the scale.
void expectAsClose(const char* what, const torch::Tensor& got, const torch::Tensor& whole, const torch::Tensor& exact) {
  const double scale = exact.abs().max().item<double>();
  const double err = maxAbsDiff(got, exact), whole_err = maxAbsDiff(whole, exact);
  // A few float ulps beside the whole path's error: the summation order of a parameter's gradient
  // changes with LibTorch's thread count (one rank per core under ctest, two threads run alone).
  EXPECT_LE(err, 1.25 * whole_err + 5e-7 * scale) << what << ": whole " << whole_err;
  EXPECT_LE(err, 1e-5 * scale) << what;
}

struct Grads {
  torch::Tensor value, hidden, weight;
};

// Values and gradients of sum(logp · g) for a fixed random g.
template <class F>
Grads run(const torch::Tensor& hidden0, const torch::Tensor& weight0, F&& logprobs) {
  const auto hidden = hidden0.detach().clone().requires_grad_(true);
  const auto weight = weight0.detach().clone().requires_grad_(true);
  const auto value = logprobs(hidden, weight);
  torch::manual_seed(99);
  const auto g = torch::randn(value.sizes());
  (value * g).sum().backward();
  return {value.detach(), hidden.grad(), weight.grad()};
}

}  // namespace

TEST(ChunkedLogProbs, ChunkRowsFollowTheByteBudget) {
  EXPECT_EQ(logitsChunkRows(1000, kQwenVocab, 64 << 20), (64 << 20) / (kQwenVocab * 4));  // 110
  EXPECT_EQ(logitsChunkRows(1000, kQwenVocab, 0), 1000);                                  // 0: one chunk
  EXPECT_EQ(logitsChunkRows(1000, kQwenVocab, 1), kMinChunkRows);                         // never a handful of rows
  EXPECT_EQ(logitsChunkRows(5, 64, std::int64_t{1} << 30), 5);                            // never more than there are
  EXPECT_EQ(logitsChunkRows(5, kQwenVocab, 1), 5);
}

TEST(ChunkedLogProbs, EqualWholeVocabularyValuesAndGradientsAtQwenVocabulary) {
  torch::manual_seed(5);
  const std::int64_t N = 301, D = 48;
  const auto hidden = torch::randn({N, D});
  const auto weight = torch::randn({kQwenVocab, D}) * 0.3;
  auto targets = torch::randint(0, kQwenVocab, {N}, torch::kLong);
  const auto never = torch::tensor({0, 7, 151934}, torch::kLong);
  targets = torch::where(torch::isin(targets, never), targets + 1, targets);  // never a target
  const auto rows = logitsChunkRows(N, kQwenVocab, 8 << 20);                  // 16 rows: 19 chunks
  ASSERT_EQ(rows, kMinChunkRows);
  const auto whole = run(hidden, weight, [&](const torch::Tensor& h, const torch::Tensor& w) {
    return wholeLogProbs(h, targets, OutputHead{w, never, 0.7});
  });
  const auto chunked = run(hidden, weight, [&](const torch::Tensor& h, const torch::Tensor& w) {
    return chunkedTokenLogProbs(h, targets, OutputHead{w, never, 0.7}, rows);
  });
  const auto exact =
      run(hidden.to(torch::kFloat64), weight.to(torch::kFloat64), [&](const torch::Tensor& h, const torch::Tensor& w) {
        return wholeLogProbs(h, targets, OutputHead{w, never, 0.7});
      });
  EXPECT_LE(maxAbsDiff(chunked.value, whole.value), 1e-6);
  expectAsClose("hidden", chunked.hidden, whole.hidden, exact.hidden);
  expectAsClose("weight", chunked.weight, whole.weight, exact.weight);
  // The never-generated rows of the weight get no gradient, as in the whole computation.
  EXPECT_EQ(chunked.weight.index_select(0, never).abs().max().item<float>(), 0.0f);
  EXPECT_GT(whole.weight.abs().max().item<float>(), 0.0f);
}

TEST(ChunkedLogProbs, RefusesMismatchedShapes) {
  const auto h = torch::randn({4, 8});
  EXPECT_THROW(chunkedTokenLogProbs(h, torch::zeros({3}, torch::kLong), OutputHead{torch::randn({16, 8}), {}, 1.0}, 2),
               std::invalid_argument);
  EXPECT_THROW(chunkedTokenLogProbs(h, torch::zeros({4}, torch::kLong), OutputHead{torch::randn({16, 9}), {}, 1.0}, 2),
               std::invalid_argument);
  EXPECT_THROW(chunkedTokenLogProbs(h, torch::zeros({4}, torch::kInt), OutputHead{torch::randn({16, 8}), {}, 1.0}, 2),
               std::invalid_argument);
}

namespace {

// The model's log-probs from its full logits: the computation sequenceLogProbs replaced.
torch::Tensor fromFullLogits(PolicyModelImpl& model, const torch::Tensor& tokens, const torch::Tensor& lengths,
                             double temperature) {
  const auto B = tokens.size(0), T = tokens.size(1);
  const auto idx = torch::arange(T, torch::kLong).unsqueeze(0);
  const auto valid = idx < lengths.unsqueeze(1);
  const auto logits = model.forward(tokens, idx.expand({B, T}).contiguous(), valid) / temperature;
  const auto logp = logits.narrow(1, 0, T - 1)
                        .to(torch::kFloat32)
                        .log_softmax(-1)
                        .gather(-1, tokens.narrow(1, 1, T - 1).unsqueeze(-1))
                        .squeeze(-1);
  const auto kept = torch::where(valid.narrow(1, 1, T - 1), logp, torch::zeros_like(logp));
  return torch::cat({torch::zeros({B, 1}, logp.options()), kept}, 1);
}

class ModelChunkedLogProbs : public ::testing::TestWithParam<bool> {};

}  // namespace

TEST_P(ModelChunkedLogProbs, SequenceLogProbsEqualTheFullLogitsPathWithGradients) {
  auto cfg = test_support::tinyModel(kQwenVocab, 32, 2, 4, 2, 64, 64);
  cfg.tied_embeddings = GetParam();
  torch::manual_seed(11);
  PolicyModel model(cfg);
  model->setNeverGenerate({0, 1});
  model->setLogitsChunkBytes(1);  // 16 rows a chunk
  const auto tokens = torch::randint(2, kQwenVocab, {3, 30}, torch::kLong);
  const auto lengths = torch::tensor({30, 17, 2}, torch::kLong);
  ASSERT_EQ(model->logitsChunkRows(29 + 16 + 1), kMinChunkRows);  // 3 chunks

  auto gradsOf = [&](PolicyModelImpl& m, const torch::Tensor& lp) {
    m.zero_grad();
    torch::manual_seed(3);
    (lp * torch::randn(lp.sizes(), lp.options())).sum().backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : m.parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto chunked = sequenceLogProbs(*model, tokens, lengths, 0.8);
  const auto chunked_grads = gradsOf(*model, chunked);
  const auto whole = fromFullLogits(*model, tokens, lengths, 0.8);
  const auto whole_grads = gradsOf(*model, whole);
  PolicyModel exact_model(cfg);  // the same weights in float64
  exact_model->setNeverGenerate({0, 1});
  exact_model->place(torch::kCPU, torch::kFloat64);
  exact_model->importTensors(model->orderedParameters());
  const auto exact = fromFullLogits(*exact_model, tokens, lengths, 0.8);
  const auto exact_grads = gradsOf(*exact_model, exact);

  EXPECT_LE(maxAbsDiff(chunked, whole), 1e-6);
  EXPECT_EQ(chunked[2].narrow(0, 2, 28).abs().max().item<float>(), 0.0f);  // padding stays 0
  ASSERT_EQ(chunked_grads.size(), whole_grads.size());
  for (std::size_t i = 0; i < whole_grads.size(); ++i) {
    expectAsClose(("parameter " + std::to_string(i)).c_str(), chunked_grads[i], whole_grads[i], exact_grads[i]);
  }
}

// A second backward while .grad holds the first's sum (micro-batches; ZeRO binds .grad to its
// buffer before any): a tied head and embedding add into that .grad in place (TiedGradient) and
// hand autograd nothing. The sums equal the full-logits path's, every parameter.
TEST_P(ModelChunkedLogProbs, GradientsAccumulateOverBackwardPasses) {
  auto cfg = test_support::tinyModel(kQwenVocab, 32, 2, 4, 2, 64, 64);
  cfg.tied_embeddings = GetParam();
  torch::manual_seed(13);
  PolicyModel model(cfg);
  model->setNeverGenerate({0, 1});
  model->setLogitsChunkBytes(1);
  const auto tokens = torch::randint(2, kQwenVocab, {3, 30}, torch::kLong);
  const auto lengths = torch::tensor({30, 17, 9}, torch::kLong);
  auto twoPasses = [&](PolicyModelImpl& m, auto&& logprobs) {
    m.zero_grad();
    for (int pass = 0; pass < 2; ++pass) {
      const auto lp = logprobs(m);
      torch::manual_seed(30 + pass);
      (lp * torch::randn(lp.sizes(), lp.options())).sum().backward();
      if (pass == 0) {
        EXPECT_TRUE(m.parameters()[0].grad().defined());
      }
    }
    std::vector<torch::Tensor> g;
    for (const auto& p : m.parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto chunked = twoPasses(*model, [&](PolicyModelImpl& m) { return sequenceLogProbs(m, tokens, lengths, 0.9); });
  const auto whole = twoPasses(*model, [&](PolicyModelImpl& m) { return fromFullLogits(m, tokens, lengths, 0.9); });
  PolicyModel exact_model(cfg);
  exact_model->setNeverGenerate({0, 1});
  exact_model->place(torch::kCPU, torch::kFloat64);
  exact_model->importTensors(model->orderedParameters());
  const auto exact =
      twoPasses(*exact_model, [&](PolicyModelImpl& m) { return fromFullLogits(m, tokens, lengths, 0.9); });
  ASSERT_EQ(chunked.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    expectAsClose(("parameter " + std::to_string(i)).c_str(), chunked[i], whole[i], exact[i]);
  }
}

TEST_P(ModelChunkedLogProbs, Bf16AutocastMatchesTheFullLogitsPath) {
  auto cfg = test_support::tinyModel(kQwenVocab, 32, 2, 4, 2, 64, 64);
  cfg.tied_embeddings = GetParam();
  torch::manual_seed(12);
  PolicyModel model(cfg);
  model->setLogitsChunkBytes(1);
  const auto tokens = torch::randint(0, kQwenVocab, {2, 30}, torch::kLong);
  const auto lengths = torch::tensor({30, 17}, torch::kLong);
  auto gradsOf = [](PolicyModelImpl& m, const torch::Tensor& lp) {
    m.zero_grad();
    lp.sum().backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : m.parameters()) g.push_back(p.grad().to(torch::kFloat64));
    return g;
  };
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  const auto chunked = sequenceLogProbs(*model, tokens, lengths);
  const auto g_chunked = gradsOf(*model, chunked);
  const auto whole = fromFullLogits(*model, tokens, lengths, 1.0);
  const auto g_whole = gradsOf(*model, whole);
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  PolicyModel exact_model(cfg);  // the same weights in float64, no autocast
  exact_model->place(torch::kCPU, torch::kFloat64);
  exact_model->importTensors(model->orderedParameters());
  const auto g_exact = gradsOf(*exact_model, fromFullLogits(*exact_model, tokens, lengths, 1.0));
  // The same bf16 products either way: only the float32 summation order may differ.
  EXPECT_LE(maxAbsDiff(chunked, whole), 1e-5);
  // Gradients: the logits' gradient is rounded to bf16 before the products, so a float32
  // difference in it (the softmax formed in place, not by autograd) moves single elements by a
  // bf16 step. Held to the float64 gradient as a whole (its norm): the chunked path at least as
  // close as the whole one, with a margin of a quarter.
  ASSERT_EQ(g_chunked.size(), g_exact.size());
  for (std::size_t i = 0; i < g_exact.size(); ++i) {
    const double scale = g_exact[i].norm().item<double>();
    const double err = (g_chunked[i] - g_exact[i]).norm().item<double>();
    const double whole_err = (g_whole[i] - g_exact[i]).norm().item<double>();
    EXPECT_LE(err, 1.25 * whole_err + 1e-6 * scale) << "parameter " << i << ": whole " << whole_err;
  }
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, ModelChunkedLogProbs, ::testing::Bool());

// The memory plan counts parameters from the config alone (core/model_config.hpp); it must
// agree with the model built from the same sizes, for every family and option.
TEST(ParameterCount, EqualsTheBuiltModelForEveryFamily) {
  auto base = test_support::tinyModel(97, 24, 2, 4, 2, 40, 32);
  std::vector<ModelConfig> cases;
  cases.push_back(base);  // Qwen3, tied
  auto untied = base;
  untied.tied_embeddings = false;
  untied.head_dim = 10;  // q/k/v widths differ from d_model
  cases.push_back(untied);
  auto qwen2 = base;
  qwen2.family = ModelFamily::Qwen2;
  cases.push_back(qwen2);
  auto llama = base;
  llama.family = ModelFamily::Llama;
  llama.attention_bias = true;
  llama.mlp_bias = true;
  cases.push_back(llama);
  for (const auto& m : cases) {
    PolicyModel model(m);
    EXPECT_EQ(parameterCount(m), model->parameterCount()) << "family " << static_cast<int>(m.family);
  }
  auto from_tokenizer = base;
  from_tokenizer.vocab_size = 0;
  EXPECT_EQ(parameterCount(from_tokenizer, 97), parameterCount(base));
}
