// The engine's CPU sampler (rollout/token_sampler_cpu.cpp, one pass over each row) against the
// LibTorch tensor path (token_sampler.cpp) on the same logits and draws: the same tokens and rows
// flagged, log-probs within 2e-6 of float64's, with temperatures, masked ids, NaN, +inf and fully
// masked rows, at a 151,936-token vocabulary too; its draws follow the softmax's probabilities;
// a draw near 1 never lands on a token of probability 0; top-p rows mixed in go the tensor path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "astraflow/core/error.hpp"
#include "rollout/token_sampler.hpp"

using namespace astraflow;
using engine_detail::RowSampling;
using engine_detail::SampledToken;

namespace {

struct SamplerCase {
  torch::Tensor logits;
  std::vector<std::vector<std::int32_t>> masked;
  std::vector<RowSampling> rows;
};

// B rows of V logits (spread like a model's, a few very likely tokens), every kind of row.
SamplerCase samplerCase(std::int64_t B, std::int64_t V, std::uint64_t seed, bool with_top_p) {
  torch::manual_seed(static_cast<std::int64_t>(seed));
  SamplerCase c;
  c.logits = torch::randn({B, V}) * 3.0;
  c.masked.resize(static_cast<std::size_t>(B));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double temps[] = {1.0, 0.5, 1.7, 0.9};
  for (std::int64_t b = 0; b < B; ++b) {
    auto& m = c.masked[static_cast<std::size_t>(b)];
    if (b % 3 == 0) m = {0, 1, static_cast<std::int32_t>(V - 1), static_cast<std::int32_t>(b % V)};
    RowSampling r;
    r.greedy = b % 4 == 1;
    r.temperature = temps[b % 4];
    r.top_p = with_top_p && b % 5 == 2 ? 0.7 : 1.0;
    r.uniform = b == B - 1 ? std::nextafter(1.0, 0.0) : u(rng);
    c.rows.push_back(r);
  }
  // Tokens never emitted are −inf (legitimate); NaN, +inf and all-masked rows are not.
  c.logits.select(0, 0).narrow(0, 5, 9).fill_(-std::numeric_limits<float>::infinity());
  if (B > 8) {
    c.logits[2][7] = std::numeric_limits<float>::quiet_NaN();
    c.logits[5][3] = std::numeric_limits<float>::infinity();
    c.logits.select(0, 8).fill_(-std::numeric_limits<float>::infinity());
  }
  for (std::int64_t b = 0; b < B; ++b)
    c.rows[static_cast<std::size_t>(b)].masked = &c.masked[static_cast<std::size_t>(b)];
  return c;
}

// log π(token) in float64 from the row's float32-scaled, masked logits: the reference both paths
// are held to.
double referenceLogprob(const SamplerCase& c, std::size_t b, std::int32_t token) {
  const auto& r = c.rows[b];
  auto scaled =
      (c.logits[static_cast<std::int64_t>(b)] / static_cast<float>(r.greedy ? 1.0 : r.temperature)).to(torch::kFloat64);
  for (auto id : c.masked[b]) scaled[id] = -std::numeric_limits<double>::infinity();
  return torch::log_softmax(scaled, -1)[token].item<double>();
}

// The same tokens and flags; log-probs within 2e-6 of float64 (the CPU path accumulates in
// float64), the tensor path's within 1e-4 (its log-softmax sums in float32: at a vocabulary of
// 151,936 and log-probs near -9 it strays by 2-3e-5, with the order its threads add in).
void expectSameDraws(const SamplerCase& c, const std::vector<SampledToken>& got,
                     const std::vector<SampledToken>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t b = 0; b < got.size(); ++b) {
    EXPECT_EQ(got[b].finite, want[b].finite) << "row " << b;
    if (!got[b].finite || !want[b].finite) continue;
    EXPECT_EQ(got[b].token, want[b].token) << "row " << b;
    const double reference = referenceLogprob(c, b, got[b].token);
    EXPECT_NEAR(got[b].logprob, reference, 2e-6) << "row " << b;
    EXPECT_NEAR(want[b].logprob, reference, 1e-4) << "row " << b;
  }
}

}  // namespace

TEST(CpuSampler, EqualsTheTensorPathOnEveryKindOfRow) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto c = samplerCase(41, 5000, seed, /*with_top_p=*/false);
    const auto want = engine_detail::sampleRowsWithTensors(c.logits, c.rows);
    const auto got = engine_detail::sampleRowsOnCpu(c.logits, c.rows);
    expectSameDraws(c, got, want);
    EXPECT_FALSE(got[2].finite);  // NaN
    EXPECT_FALSE(got[5].finite);  // +inf
    EXPECT_FALSE(got[8].finite);  // every token −inf
    EXPECT_TRUE(got[0].finite);   // some −inf is fine
    // Masked ids are never drawn.
    for (std::size_t b = 0; b < got.size(); ++b) {
      for (auto id : c.masked[b]) EXPECT_NE(got[b].token, id) << "row " << b;
    }
    // The logits are the caller's (a shared prompt's are reused): unchanged.
    EXPECT_TRUE(torch::equal(c.logits.isnan(), samplerCase(41, 5000, seed, false).logits.isnan()));
  }
}

TEST(CpuSampler, AtARealVocabularyAndBatch) {
  const auto c = samplerCase(64, 151936, 7, /*with_top_p=*/false);
  expectSameDraws(c, engine_detail::sampleRowsOnCpu(c.logits, c.rows),
                  engine_detail::sampleRowsWithTensors(c.logits, c.rows));
}

TEST(CpuSampler, TopPRowsMixedInGoTheTensorPath) {
  const auto c = samplerCase(23, 3000, 11, /*with_top_p=*/true);
  expectSameDraws(c, engine_detail::sampleRows(c.logits, c.rows),
                  engine_detail::sampleRowsWithTensors(c.logits, c.rows));
  EXPECT_THROW(engine_detail::sampleRowsOnCpu(c.logits, c.rows), Error);
}

TEST(CpuSampler, DrawsFollowTheSoftmaxAndNeverPickAZeroProbabilityToken) {
  // Five tokens and three that can never be drawn (−inf), at temperature 0.8.
  const std::vector<float> row{1.0f, 0.0f, 2.5f, -1.0f, 0.5f, -INFINITY, -INFINITY, -INFINITY};
  const auto logits = torch::tensor(row).unsqueeze(0);
  const auto probs = torch::softmax(logits / 0.8f, -1);
  const int n = 20000;
  std::vector<int> counts(row.size(), 0);
  for (int i = 0; i < n; ++i) {
    RowSampling r;
    r.temperature = 0.8;
    r.uniform = (i + 0.5) / n;  // evenly spread draws: frequencies are the CDF's steps
    const auto got = engine_detail::sampleRowsOnCpu(logits, {r});
    ASSERT_TRUE(got[0].finite);
    ++counts[static_cast<std::size_t>(got[0].token)];
    EXPECT_NEAR(got[0].logprob, std::log(probs[0][got[0].token].item<float>()), 1e-5);
  }
  for (std::size_t t = 0; t < row.size(); ++t) {
    EXPECT_NEAR(counts[t] / static_cast<double>(n), probs[0][static_cast<std::int64_t>(t)].item<double>(), 1e-3)
        << "token " << t;
  }
  RowSampling last;
  last.uniform = std::nextafter(1.0, 0.0);
  EXPECT_EQ(engine_detail::sampleRowsOnCpu(logits, {last})[0].token, 4);  // the last token that can be drawn
}
