// Attention through at::scaled_dot_product_attention gives the logits of the explicit
// (eager) attention it replaced — causal prefill with left padding, single-position decode over
// the KV cache, grouped-query heads — and a model placed in bf16 computes in bf16 (weights, KV
// cache) while its logits stay float32 and close to the float32 model's.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include "astraflow/core/error.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/model/policy_model.hpp"

using namespace astraflow;

namespace {

// Two models with the same weights, one per attention kind.
struct Pair {
  PolicyModel sdpa{nullptr}, eager{nullptr};
};

Pair pairOf(ModelConfig m, std::uint64_t seed) {
  m.attention = AttentionKind::Sdpa;
  torch::manual_seed(seed);
  Pair p{PolicyModel(m), nullptr};
  m.attention = AttentionKind::Eager;
  p.eager = PolicyModel(m);
  p.eager->importTensors(p.sdpa->orderedParameters());
  p.sdpa->setNeverGenerate({0});
  p.eager->setNeverGenerate({0});
  return p;
}

double maxFiniteDiff(const torch::Tensor& a, const torch::Tensor& b) {
  // Never-generated tokens are −inf in both; compare the rest.
  const auto both = torch::isfinite(a) & torch::isfinite(b);
  EXPECT_TRUE(torch::equal(torch::isfinite(a), torch::isfinite(b)));
  return torch::where(both, a - b, torch::zeros_like(a)).abs().max().item<double>();
}

// Left-padded prompts of different lengths (pad id 0).
torch::Tensor leftPadded(std::int64_t vocab) {
  auto tokens = torch::randint(1, vocab, {3, 9}, torch::kLong);
  tokens.narrow(1, 0, 4).select(0, 1).fill_(0);
  tokens.narrow(1, 0, 7).select(0, 2).fill_(0);
  return tokens;
}

}  // namespace

// Grouped-query (4 query heads on 2 KV heads) and multi-query (4 on 1) and plain multi-head.
class SdpaAttention : public ::testing::TestWithParam<int> {};

TEST_P(SdpaAttention, PrefillMatchesEagerAttention) {
  const int kv_heads = GetParam();
  auto p = pairOf(test_support::tinyModel(40, 32, 2, 4, kv_heads, 48, 32), 11);
  torch::NoGradGuard ng;
  const auto tokens = leftPadded(40);
  auto [pos, valid] = positionsForLeftPadded(tokens, 0);
  // The valid positions: a padding query's logits are no one's (sdpa attends per span there and
  // leaves padding cells out; eager's mask lets a padding query see itself).
  const auto a = p.sdpa->forward(tokens, pos, valid).index({valid}),
             b = p.eager->forward(tokens, pos, valid).index({valid});
  ASSERT_EQ(a.scalar_type(), torch::kFloat32);
  const double diff = maxFiniteDiff(a, b);
  RecordProperty("sdpa_vs_eager_prefill_max_abs_logit_diff", std::to_string(diff));
  EXPECT_LT(diff, 1e-5);
  // The comparison can fail: different weights give different logits.
  torch::manual_seed(12);
  PolicyModel other(p.eager->config());
  other->setNeverGenerate({0});
  EXPECT_GT(maxFiniteDiff(other->forward(tokens, pos, valid).index({valid}), b), 1e-3);
}

TEST_P(SdpaAttention, CachedDecodeMatchesEagerAttention) {
  const int kv_heads = GetParam();
  auto p = pairOf(test_support::tinyModel(40, 32, 2, 4, kv_heads, 48, 32), 13);
  torch::NoGradGuard ng;
  const auto prompt = leftPadded(40);
  auto [pos, valid] = positionsForLeftPadded(prompt, 0);
  auto ca = p.sdpa->newCache(3, 16), cb = p.eager->newCache(3, 16);
  double worst =
      maxFiniteDiff(p.sdpa->forwardCached(prompt, pos, valid, ca), p.eager->forwardCached(prompt, pos, valid, cb));
  auto next_pos = pos.select(1, 8).unsqueeze(1) + 1;
  for (int step = 0; step < 6; ++step) {
    const auto tok = torch::randint(1, 40, {3, 1}, torch::kLong);
    const auto v = torch::ones({3, 1}, torch::kBool);
    worst = std::max(worst, maxFiniteDiff(p.sdpa->forwardCached(tok, next_pos, v, ca),
                                          p.eager->forwardCached(tok, next_pos, v, cb)));
    next_pos = next_pos + 1;
  }
  RecordProperty("sdpa_vs_eager_decode_max_abs_logit_diff", std::to_string(worst));
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(ca.length, 15);
}

INSTANTIATE_TEST_SUITE_P(Heads, SdpaAttention, ::testing::Values(1, 2, 4));

TEST(Precision, Bf16ModelComputesInBf16WithFloat32Logits) {
  const auto m = test_support::tinyModel(40, 32, 2, 4, 2, 48, 32);
  torch::manual_seed(21);
  PolicyModel fp32(m);
  torch::manual_seed(21);
  PolicyModel bf16(m);
  bf16->place(torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(bf16->dtype(), torch::kBFloat16);
  for (const auto& p : bf16->orderedParameters()) EXPECT_EQ(p.tensor.scalar_type(), torch::kBFloat16) << p.name;
  torch::NoGradGuard ng;
  const auto tokens = leftPadded(40);
  auto [pos, valid] = positionsForLeftPadded(tokens, 0);
  auto cache = bf16->newCache(3, 9);
  EXPECT_EQ(cache.keys[0].scalar_type(), torch::kBFloat16);
  // The valid positions (a padding query's logits are no one's).
  const auto lb = bf16->forwardCached(tokens, pos, valid, cache).index({valid});
  const auto lf = fp32->forward(tokens, pos, valid).index({valid});
  EXPECT_EQ(lb.scalar_type(), torch::kFloat32);
  const double diff = maxFiniteDiff(lb, lf);
  RecordProperty("bf16_vs_fp32_max_abs_logit_diff", std::to_string(diff));
  // bf16 keeps 8 bits of mantissa: logits of magnitude ~1 agree to a few 1e-2, not to 1e-5.
  EXPECT_LT(diff, 0.1);
  EXPECT_GT(diff, 0.0) << "the bf16 model computed in float32";
  // The export is the same bf16 bytes whichever dtype the model holds.
  const auto ef = fp32->exportBf16(), eb = bf16->exportBf16();
  for (std::size_t i = 0; i < ef.size(); ++i) EXPECT_TRUE(torch::equal(ef[i].tensor, eb[i].tensor)) << ef[i].name;
}

TEST(Device, CpuResolvesAndCudaIsRefusedByNameWithoutAGpu) {
  DeviceRequest cpu;
  EXPECT_EQ(resolveDevice(cpu, 3, "trainer.device"), torch::Device(torch::kCPU));
  DeviceRequest cuda;
  ASSERT_TRUE(parseDeviceRequest("cuda:1", cuda));
  if (cudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a GPU: the refusal is for machines without one";
  try {
    resolveDevice(cuda, 0, "rollout.device");
    FAIL() << "cuda:1 resolved on a machine without a GPU";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rollout.device"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:1"), std::string::npos) << what;
    EXPECT_NE(what.find("allowed here: cpu"), std::string::npos) << what;
  }
}

TEST(Device, RequestsParseOnlyTheDocumentedForms) {
  DeviceRequest d;
  ASSERT_TRUE(parseDeviceRequest("cuda", d));
  EXPECT_TRUE(d.cuda());
  EXPECT_EQ(d.index, -1);
  ASSERT_TRUE(parseDeviceRequest("cuda:7", d));
  EXPECT_EQ(d.index, 7);
  EXPECT_EQ(d.text(), "cuda:7");
  ASSERT_TRUE(parseDeviceRequest("cpu", d));
  EXPECT_FALSE(d.cuda());
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA", "cuda:99999", "cpu:0", ""}) {
    EXPECT_FALSE(parseDeviceRequest(bad, d)) << bad;
  }
}
