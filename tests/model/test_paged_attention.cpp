// The CPU decode attention that reads the KV block pool in place (model/paged_attention.cpp)
// against attention computed densely in float64 from the same keys, gathered by torch: float32
// and bf16 pools, every grouping of query heads on KV heads, keys scattered over the pool with
// holes in the mask, a 32k-token context; and the model's paged decode step with it against the
// same step on the gather + scaled_dot_product_attention path, for both attention kinds.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include "astraflow/core/error.hpp"
#include "astraflow/model/policy_model.hpp"
#include "model/paged_attention.hpp"

using namespace astraflow;

namespace {

struct Case {
  torch::Tensor q, keys, values, slots, allowed;
};

// B rows of K keys each at distinct random pool slots (a permutation, as block tables give),
// each key seen with probability 0.8 and key 0 always.
Case randomCase(std::int64_t B, std::int64_t H, std::int64_t KV, std::int64_t hd, std::int64_t K,
                torch::ScalarType dtype, std::uint64_t seed) {
  torch::manual_seed(seed);
  const std::int64_t slots = B * K + 7;
  Case c;
  c.q = torch::randn({B, H, hd}).to(dtype);
  c.keys = torch::randn({slots, KV, hd}).to(dtype);
  c.values = torch::randn({slots, KV, hd}).to(dtype);
  c.slots = torch::randperm(slots, torch::kLong).narrow(0, 0, B * K).view({B, K}).contiguous();
  c.allowed = torch::rand({B, K}) < 0.8;
  c.allowed.select(1, 0).fill_(true);
  return c;
}

// softmax(q·kᵀ·scale)·v in float64 over each row's gathered keys, masked.
torch::Tensor denseReference(const Case& c, double scale) {
  const auto B = c.q.size(0), H = c.q.size(1), hd = c.q.size(2), KV = c.keys.size(1), K = c.slots.size(1);
  const auto k = c.keys.to(torch::kFloat64).index_select(0, c.slots.flatten()).view({B, K, KV, hd});
  const auto v = c.values.to(torch::kFloat64).index_select(0, c.slots.flatten()).view({B, K, KV, hd});
  const auto head_kv = torch::arange(H, torch::kLong).div(H / KV, "floor");  // query head → KV head
  const auto kh = k.index_select(2, head_kv).permute({0, 2, 1, 3});          // [B,H,K,hd]
  const auto vh = v.index_select(2, head_kv).permute({0, 2, 1, 3});
  auto scores = torch::matmul(c.q.to(torch::kFloat64).unsqueeze(2), kh.transpose(-1, -2)).squeeze(2) * scale;
  scores = scores.masked_fill(c.allowed.logical_not().unsqueeze(1), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1).unsqueeze(2), vh).squeeze(2);  // [B,H,hd]
}

}  // namespace

class PagedDecodeAttention : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(PagedDecodeAttention, Float32EqualsDenseAttentionOverTheGatheredKeys) {
  const std::int64_t kv = GetParam();
  const auto c = randomCase(5, 8, kv, 64, 97, torch::kFloat32, 3 + kv);
  const double scale = 1.0 / 8.0;
  const auto got = pagedDecodeAttention(c.q, c.keys, c.values, c.slots, c.allowed, scale);
  ASSERT_EQ(got.scalar_type(), torch::kFloat32);
  EXPECT_LT((got.to(torch::kFloat64) - denseReference(c, scale)).abs().max().item<double>(), 1e-5);
}

TEST_P(PagedDecodeAttention, Bf16IsComputedInFloat32AndRoundedOnce) {
  const std::int64_t kv = GetParam();
  const auto c = randomCase(4, 8, kv, 128, 61, torch::kBFloat16, 17 + kv);
  const double scale = 1.0 / std::sqrt(128.0);
  const auto got = pagedDecodeAttention(c.q, c.keys, c.values, c.slots, c.allowed, scale);
  ASSERT_EQ(got.scalar_type(), torch::kBFloat16);
  // The reference from the same bf16 inputs, rounded to bf16 once: at most one bf16 step apart.
  const auto want = denseReference(c, scale).to(torch::kBFloat16).to(torch::kFloat64);
  const auto diff = (got.to(torch::kFloat64) - want).abs();
  EXPECT_TRUE((diff <= want.abs() * (1.0 / 128) + 1e-6).all().item<bool>()) << diff.max().item<double>();
}

// 8 query heads on 8, 4, 2 and 1 KV heads.
INSTANTIATE_TEST_SUITE_P(Groups, PagedDecodeAttention, ::testing::Values(8, 4, 2, 1));

TEST(PagedDecodeAttention, AThirtyTwoThousandTokenContext) {
  const auto c = randomCase(2, 4, 2, 64, 32768, torch::kFloat32, 5);
  const auto got = pagedDecodeAttention(c.q, c.keys, c.values, c.slots, c.allowed, 0.125);
  EXPECT_LT((got.to(torch::kFloat64) - denseReference(c, 0.125)).abs().max().item<double>(), 1e-5);
}

TEST(PagedDecodeAttention, ARowThatSeesNoKeyGetsZerosAndBadShapesAreRefused) {
  auto c = randomCase(3, 4, 2, 16, 9, torch::kFloat32, 9);
  c.allowed.select(0, 1).fill_(false);
  const auto got = pagedDecodeAttention(c.q, c.keys, c.values, c.slots, c.allowed, 0.25);
  EXPECT_TRUE(torch::equal(got.select(0, 1), torch::zeros({4, 16})));
  EXPECT_LT((got.select(0, 0).to(torch::kFloat64) - denseReference(c, 0.25).select(0, 0)).abs().max().item<double>(),
            1e-5);
  EXPECT_THROW(pagedDecodeAttention(c.q, c.keys.to(torch::kFloat64), c.values, c.slots, c.allowed, 0.25), Error);
  EXPECT_THROW(pagedDecodeAttention(c.q.narrow(1, 0, 3), c.keys, c.values, c.slots, c.allowed, 0.25), Error);
  EXPECT_THROW(pagedDecodeAttention(c.q, c.keys, c.values, c.slots, c.allowed.narrow(1, 0, 4), 0.25), Error);
  EXPECT_FALSE(pagedDecodeAttentionApplies(c.keys, 2));
}

// The model's decode step over a pool: in place against gathered (SDPA or eager), same logits.
class PagedDecodeStep : public ::testing::TestWithParam<AttentionKind> {};

TEST_P(PagedDecodeStep, InPlaceEqualsTheGatherPath) {
  auto m = test_support::tinyModel(50, 64, 2, 8, 2, 96, 64);
  m.attention = GetParam();
  torch::manual_seed(23);
  PolicyModel model(m);
  torch::NoGradGuard no_grad;
  const std::int64_t B = 3, slots = 256, KV = 2, hd = 8, K = 20;
  // Row b holds positions 0..len_b-1 at scattered slots; the step writes position len_b.
  const std::vector<std::int64_t> lens{5, 19, 11};
  auto perm = torch::randperm(slots - 1, torch::kLong) + 1;  // slot 0 stays scratch
  auto reads = torch::zeros({B, K}, torch::kLong), key_pos = torch::zeros({B, K}, torch::kLong);
  auto key_valid = torch::zeros({B, K}, torch::kBool), writes = torch::zeros({B}, torch::kLong);
  auto tokens = torch::randint(1, 50, {B, 1}, torch::kLong), positions = torch::zeros({B, 1}, torch::kLong);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t k = 0; k <= lens[static_cast<std::size_t>(b)]; ++k) {
      reads[b][k] = perm[b * K + k];
      key_pos[b][k] = k;
      key_valid[b][k] = true;
    }
    writes[b] = perm[b * K + lens[static_cast<std::size_t>(b)]];
    positions[b][0] = lens[static_cast<std::size_t>(b)];
  }
  std::vector<torch::Tensor> keys, values;
  for (int l = 0; l < m.layers; ++l) {
    keys.push_back(torch::randn({slots, KV, hd}));
    values.push_back(torch::randn({slots, KV, hd}));
  }
  auto run = [&](bool in_place) {
    std::vector<torch::Tensor> k2, v2;
    for (int l = 0; l < m.layers; ++l) {
      k2.push_back(keys[static_cast<std::size_t>(l)].clone());
      v2.push_back(values[static_cast<std::size_t>(l)].clone());
    }
    model->setInPlacePagedDecode(in_place, /*always=*/true);
    PagedKv kv{k2, v2, writes, reads.flatten(), key_pos, key_valid, {}};
    auto logits = model->forwardPaged(tokens, positions, torch::ones({B, 1}, torch::kBool), kv);
    return std::make_pair(logits, k2);
  };
  const auto [in_place, pool_a] = run(true);
  const auto [gathered, pool_b] = run(false);
  const auto both = torch::isfinite(in_place) & torch::isfinite(gathered);
  EXPECT_TRUE(torch::equal(torch::isfinite(in_place), torch::isfinite(gathered)));
  EXPECT_LT(torch::where(both, in_place - gathered, torch::zeros_like(in_place)).abs().max().item<double>(), 1e-5);
  // Both wrote the new positions' keys into the pool: layer 0's from the same input, the next
  // layers' from inputs a rounding apart.
  EXPECT_TRUE(torch::equal(pool_a[0], pool_b[0]));
  EXPECT_FALSE(torch::equal(pool_a[0], keys[0]));
  for (std::size_t l = 1; l < pool_a.size(); ++l) EXPECT_TRUE(torch::allclose(pool_a[l], pool_b[l], 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Kinds, PagedDecodeStep, ::testing::Values(AttentionKind::Sdpa, AttentionKind::Eager));
