// Losses against hand-computed numbers on tiny tensors (the arithmetic is in the comments).
// Tensors are float64 so that 1e-9 tolerances hold.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "astraflow/trainer/loss.hpp"

namespace astraflow {
namespace {

constexpr double kTol = 1e-9;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

torch::Tensor vec(std::vector<double> v) { return torch::tensor(v, torch::kDouble); }
torch::Tensor mat(std::vector<double> v, int64_t rows) { return vec(std::move(v)).reshape({rows, -1}); }

std::vector<double> values(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kDouble).contiguous().reshape(-1);
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

void expectNear(const torch::Tensor& t, const std::vector<double>& expected, double tol = kTol) {
  const auto got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

// Expects `fn` to throw std::invalid_argument whose message names `tensor`.
template <typename Fn>
void expectInvalidNaming(Fn fn, const std::string& tensor) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one naming " << tensor;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(tensor), std::string::npos) << e.what();
  }
}

// logp = logp_behav + log r, so the ratio against logp_behav is exactly r (up to rounding).
PolicyLossInputs ratioInputs(const std::vector<double>& r, double advantage) {
  PolicyLossInputs in;
  in.logp_behav = mat(std::vector<double>(r.size(), -1.0), 1);
  in.logp = (in.logp_behav + torch::log(mat(r, 1))).detach().requires_grad_(true);
  in.advantages = vec({advantage});
  in.mask = torch::ones_like(in.logp_behav);
  return in;
}

// ---------------------------------------------------------------- groupAdvantages
// Rewards/groups: id 7 → {1, 3, 5}, id −3 → {10, 20}, id 42 → {9} (singleton).
//   group 7: mean 3, centred {−2, 0, 2}, population std √(8/3) = 1.6329932
//   group −3: mean 15, centred {−5, 5}, population std 5
const std::vector<double> kRewards = {1, 10, 3, 9, 20, 5};
torch::Tensor groupIds() { return torch::tensor({7, -3, 7, 42, -3, 7}, torch::kLong); }

TEST(GroupAdvantages, CentredOnly) {
  expectNear(groupAdvantages(vec(kRewards), groupIds(), /*scale_by_std=*/false), {-2, -5, 0, 0, 5, 2});
}

TEST(GroupAdvantages, ScaledByPopulationGroupStd) {
  // −2/1.6329932 = −1.2247449, −5/5 = −1; unbiased std would give −1 and −0.7071 instead.
  const double a = 2.0 / std::sqrt(8.0 / 3.0);
  expectNear(groupAdvantages(vec(kRewards), groupIds(), true, false, /*eps=*/1e-6), {-a, -1, 0, 0, 1, a}, 1e-5);
}

TEST(GroupAdvantages, BatchNormalizedIgnoresScaleByStd) {
  // Centred {−2, −5, 0, 0, 5, 2}: mean 0, population std √(58/6) = 3.1091264.
  // → {−0.6432675, −1.6081688, 0, 0, 1.6081688, 0.6432675}
  const double s = std::sqrt(58.0 / 6.0);
  const std::vector<double> expected = {-2 / s, -5 / s, 0, 0, 5 / s, 2 / s};
  expectNear(groupAdvantages(vec(kRewards), groupIds(), true, true, 1e-6), expected, 1e-5);
  expectNear(groupAdvantages(vec(kRewards), groupIds(), false, true, 1e-6), expected, 1e-5);
}

TEST(GroupAdvantages, SingletonAndFlatGroupsAreExactlyZero) {
  // Even with eps = 0 (0/0 would be NaN): a singleton and an all-equal group {0.1, 0.1, 0.1}.
  const auto adv =
      groupAdvantages(vec({0.7, 0.1, 0.1, 0.1}), torch::tensor({5, 9, 9, 9}, torch::kLong), true, false, /*eps=*/0.0);
  expectNear(adv, {0, 0, 0, 0}, 0.0);
  EXPECT_EQ(adv.scalar_type(), torch::kDouble);
}

TEST(GroupAdvantages, RejectsMismatchedGroupIds) {
  expectInvalidNaming([] { groupAdvantages(vec({1, 2, 3}), torch::tensor({1, 1}, torch::kLong)); }, "group_ids");
}

// ---------------------------------------------------------------- PPO clip
TEST(PolicyLoss, ClipHighActiveForPositiveAdvantage) {
  // A = 2, ε_low 0.2, ε_high 0.28 (clip range [0.8, 1.28]), r = {1.5, 0.5, 1.1}:
  //   tok0: min(1.5·2, 1.28·2) = 2.56   clip active (the ε_high bound)
  //   tok1: min(0.5·2, 0.8·2)  = 1.0    below range, but the unclipped term is selected
  //   tok2: min(1.1·2, 1.1·2)  = 2.2    inside the range
  //   loss = −(2.56 + 1.0 + 2.2)/3 = −1.92; clipped fraction 1/3.
  // d loss/d logp_j = −A·r_j/3 where unclipped (dr/dlogp = r): tok1 −1/3, tok2 −2.2/3; tok0 0.
  auto in = ratioInputs({1.5, 0.5, 1.1}, 2.0);
  PolicyLossOptions opt;
  opt.clip_low = 0.2;
  opt.clip_high = 0.28;
  const auto res = policyLoss(in, opt);
  EXPECT_NEAR(res.loss.item<double>(), -1.92, kTol);
  EXPECT_NEAR(res.clipped_fraction, 1.0 / 3.0, kTol);
  EXPECT_EQ(res.kept_tokens, 3);
  EXPECT_EQ(res.nonfinite_tokens, 0);
  EXPECT_EQ(res.kl, 0.0);
  res.loss.backward();
  expectNear(in.logp.grad(), {0.0, -1.0 / 3.0, -2.2 / 3.0});
}

TEST(PolicyLoss, ClipLowActiveForNegativeAdvantage) {
  // A = −1, range [0.8, 1.28], r = {0.5, 1.5, 1.0}:
  //   tok0: min(−0.5, −0.8) = −0.8   clip active (the ε_low bound)
  //   tok1: min(−1.5, −1.28) = −1.5  above range, unclipped selected
  //   tok2: −1.0
  //   loss = −(−0.8 − 1.5 − 1.0)/3 = 1.1; gradient −A·r/3: {0, 0.5, 1/3}.
  auto in = ratioInputs({0.5, 1.5, 1.0}, -1.0);
  PolicyLossOptions opt;
  opt.clip_low = 0.2;
  opt.clip_high = 0.28;
  const auto res = policyLoss(in, opt);
  EXPECT_NEAR(res.loss.item<double>(), 1.1, kTol);
  EXPECT_NEAR(res.clipped_fraction, 1.0 / 3.0, kTol);
  res.loss.backward();
  expectNear(in.logp.grad(), {0.0, 0.5, 1.0 / 3.0});
}

TEST(PolicyLoss, MaskedTokensDoNotCount) {
  // r = {1.1, 5.0, 0.9}, A = 1, mask {1, 0, 1}: loss = −(1.1 + 0.9)/2 = −1; no kept token clipped.
  auto in = ratioInputs({1.1, 5.0, 0.9}, 1.0);
  in.mask = mat({1, 0, 1}, 1);
  const auto res = policyLoss(in, PolicyLossOptions{});
  EXPECT_NEAR(res.loss.item<double>(), -1.0, kTol);
  EXPECT_EQ(res.kept_tokens, 2);
  EXPECT_EQ(res.clipped_fraction, 0.0);
  res.loss.backward();
  expectNear(in.logp.grad(), {-1.1 / 2, 0.0, -0.9 / 2});
}

TEST(PolicyLoss, DecoupledPpoUsesProximalRatioAndBehaviourWeight) {
  // w = π_prox/π_behav = {1.5, 0.5}; r = π_θ/π_prox = {1.1, 1.5}; A = 1, clip 0.2:
  //   tok0: −1.5·min(1.1, 1.1) = −1.65
  //   tok1: −0.5·min(1.5, 1.2) = −0.6   (clipped)
  //   loss = (−1.65 − 0.6)/2 = −1.125; d/dlogp_0 = −w·A·r/2 = −0.825, tok1 0.
  // (Non-decoupled, r against π_behav = {1.65, 0.75} would give −(1.2 + 0.75)/2 = −0.975.)
  PolicyLossInputs in;
  in.logp_behav = mat({-2.0, -2.0}, 1);
  in.logp_prox = (in.logp_behav + torch::log(mat({1.5, 0.5}, 1))).requires_grad_(true);
  in.logp = (in.logp_prox.detach() + torch::log(mat({1.1, 1.5}, 1))).requires_grad_(true);
  in.advantages = vec({1.0});
  in.mask = torch::ones({1, 2}, torch::kDouble);
  PolicyLossOptions opt;
  opt.decoupled = true;
  const auto res = policyLoss(in, opt);
  EXPECT_NEAR(res.loss.item<double>(), -1.125, kTol);
  EXPECT_NEAR(res.clipped_fraction, 0.5, kTol);
  res.loss.backward();
  expectNear(in.logp.grad(), {-0.825, 0.0});
  EXPECT_FALSE(in.logp_prox.grad().defined()) << "w and logp_prox must carry no gradient";

  opt.decoupled = false;
  EXPECT_NEAR(policyLoss(in, opt).loss.item<double>(), -0.975, kTol);
}

// ---------------------------------------------------------------- KL
TEST(KlEstimate, K1AndK3Values) {
  // logp = {−1, −2}, logp_ref = {−1.5, −1}:
  //   k1 = logp − ref = {0.5, −1}
  //   k3 = e^(ref−logp) − (ref−logp) − 1 = {e^−0.5 + 0.5 − 1, e^1 − 1 − 1} = {0.1065307, 0.7182818}
  const auto logp = mat({-1, -2}, 1), ref = mat({-1.5, -1}, 1);
  expectNear(klEstimate(logp, ref, KlEstimator::K1), {0.5, -1.0});
  expectNear(klEstimate(logp, ref, KlEstimator::K3), {std::exp(-0.5) - 0.5, std::exp(1.0) - 2.0});
  expectInvalidNaming([&] { klEstimate(logp, mat({0, 0, 0}, 1), KlEstimator::K1); }, "logp_ref");
}

TEST(PolicyLoss, KlPenaltyAddsBetaTimesMeanKl) {
  // A = 0 and logp = logp_behav: the surrogate is 0, so loss = β·mean(KL), β = 0.1.
  //   k3: mean {0.1065307, 0.7182818} = 0.4124062 → loss 0.04124062
  //   d/dlogp of β·k3/2 = β·(1 − e^(ref−logp))/2 = {0.05·(1 − e^−0.5), 0.05·(1 − e)} = {0.0196735, −0.0859141}
  //   k1: mean {0.5, −1} = −0.25 → loss −0.025
  PolicyLossInputs in;
  in.logp = mat({-1, -2}, 1).requires_grad_(true);
  in.logp_behav = mat({-1, -2}, 1);
  in.logp_ref = mat({-1.5, -1}, 1);
  in.advantages = vec({0.0});
  in.mask = torch::ones({1, 2}, torch::kDouble);
  PolicyLossOptions opt;
  opt.kl_coef = 0.1;
  const double k3_mean = (std::exp(-0.5) - 0.5 + std::exp(1.0) - 2.0) / 2;
  const auto res = policyLoss(in, opt);
  EXPECT_NEAR(res.kl, k3_mean, kTol);
  EXPECT_NEAR(res.loss.item<double>(), 0.1 * k3_mean, kTol);
  res.loss.backward();
  expectNear(in.logp.grad(), {0.05 * (1 - std::exp(-0.5)), 0.05 * (1 - std::exp(1.0))});

  opt.kl_estimator = KlEstimator::K1;
  const auto k1 = policyLoss(in, opt);
  EXPECT_NEAR(k1.kl, -0.25, kTol);
  EXPECT_NEAR(k1.loss.item<double>(), -0.025, kTol);

  in.logp_ref = torch::Tensor();
  expectInvalidNaming([&] { policyLoss(in, opt); }, "logp_ref");
}

// ---------------------------------------------------------------- M2PO
// logp_behav = 0 so Δ = logp exactly. Mask tokens' Δ = {0.1, 0.5, 0.05 | 0.4, 0.1}, plus a
// masked-out token with Δ = 0. Δ² = {0.01, 0.25, 0.0025, 0.16, 0.01}, τ = 0.04:
//   keep all:        0.4325/5 = 0.0865  > τ
//   drop 0.25:       0.1825/4 = 0.045625 > τ
//   drop 0.25, 0.16: 0.0225/3 = 0.0075  ≤ τ   → exactly the two largest go (one per row).
// Counting the masked-out Δ = 0 would wrongly stop after one removal (0.1825/5 = 0.0365 ≤ τ).
struct M2poCase {
  torch::Tensor logp = mat({0.1, 0.5, 0.05, 0.4, 0.1, 0.0}, 2);
  torch::Tensor behav = torch::zeros({2, 3}, torch::kDouble);
  torch::Tensor mask = mat({1, 1, 1, 1, 1, 0}, 2);
};

TEST(M2poMask, RemovesExactlyTheTwoLargestJointly) {
  M2poCase c;
  expectNear(m2poMask(c.logp, c.behav, c.mask, 0.04), {1, 0, 1, 0, 1, 0}, 0.0);
}

TEST(M2poMask, RemovesNoneWhenAlreadyWithinBound) {
  // Row 0 Δ² = {0.0625, 0.0625}, row 1 Δ² = {0, 0}: batch mean 0.03125 ≤ 0.04 → none go
  // (row 0 alone, mean 0.0625, would exceed τ: the pool is the whole batch).
  const auto logp = mat({0.25, -0.25, 0.0, 0.0}, 2);
  const auto mask = torch::ones({2, 2}, torch::kDouble);
  expectNear(m2poMask(logp, torch::zeros_like(logp), mask, 0.04), {1, 1, 1, 1}, 0.0);
}

TEST(M2poMask, RemovesAllWhenBoundUnreachable) {
  // τ = 0 and every Δ ≠ 0: only the empty set has mean Δ² ≤ 0.
  const auto logp = mat({0.1, 0.2, -0.3}, 1);
  expectNear(m2poMask(logp, torch::zeros_like(logp), torch::ones_like(logp), 0.0), {0, 0, 0}, 0.0);
}

TEST(M2poMask, TiesGoInIndexOrder) {
  // Δ² = {0.09, 0.09, 0}: mean 0.06 > 0.05; one removal → 0.045 ≤ 0.05. The tie between the
  // first two is broken by index: token 0 goes.
  const auto logp = mat({0.3, -0.3, 0.0}, 1);
  expectNear(m2poMask(logp, torch::zeros_like(logp), torch::ones_like(logp), 0.05), {0, 1, 1}, 0.0);
}

TEST(PolicyLoss, M2poMasksTokensOutOfTheLoss) {
  // M2poCase with A = {1, 1}, r = e^Δ inside [0.8, 1.2] for the kept tokens (Δ 0.1, 0.05, 0.1):
  //   loss = −(e^0.1 + e^0.05 + e^0.1)/3; M2PO removed 2 of 5 mask tokens.
  //   Gradient −r/3 on kept tokens, 0 on the removed ones (Δ 0.5 and 0.4).
  M2poCase c;
  PolicyLossInputs in;
  in.logp = c.logp.clone().requires_grad_(true);
  in.logp_behav = c.behav;
  in.advantages = vec({1.0, 1.0});
  in.mask = c.mask;
  PolicyLossOptions opt;
  opt.m2po = true;
  opt.m2_threshold = 0.04;
  const auto res = policyLoss(in, opt);
  const double e1 = std::exp(0.1), e05 = std::exp(0.05);
  EXPECT_NEAR(res.loss.item<double>(), -(2 * e1 + e05) / 3, kTol);
  EXPECT_NEAR(res.m2po_masked_fraction, 0.4, kTol);
  EXPECT_EQ(res.kept_tokens, 3);
  EXPECT_EQ(res.clipped_fraction, 0.0);
  res.loss.backward();
  expectNear(in.logp.grad(), {-e1 / 3, 0, -e05 / 3, 0, -e1 / 3, 0});

  // Every token removed: loss is exactly 0 (denominator max(Σ mask, 1)), not NaN.
  opt.m2_threshold = 0.0;
  const auto all = policyLoss(in, opt);
  EXPECT_EQ(all.kept_tokens, 0);
  EXPECT_EQ(all.m2po_masked_fraction, 1.0);
  EXPECT_EQ(all.loss.item<double>(), 0.0);
}

// ---------------------------------------------------------------- robustness
TEST(PolicyLoss, NonFiniteInputsAreDroppedAndCounted) {
  // Row 0: behav {0, NaN, NaN}, mask {1, 1, 0}, A = 1 → token 1 dropped (token 2 is padding).
  // Row 1: A = inf, mask {1, 1, 0} → both its tokens dropped. Row 1's padding logp is NaN too.
  // Only token (0,0) remains: r = e^0 = 1 → loss −1, gradient −1 there, 0 elsewhere.
  PolicyLossInputs in;
  in.logp = mat({0, 0, 0, 0, 0, kNaN}, 2).requires_grad_(true);
  in.logp_behav = mat({0, kNaN, kNaN, 0, 0, 0}, 2);
  in.advantages = vec({1.0, kInf});
  in.mask = mat({1, 1, 0, 1, 1, 0}, 2);
  const auto res = policyLoss(in, PolicyLossOptions{});
  EXPECT_TRUE(std::isfinite(res.loss.item<double>()));
  EXPECT_NEAR(res.loss.item<double>(), -1.0, kTol);
  EXPECT_EQ(res.kept_tokens, 1);
  EXPECT_EQ(res.nonfinite_tokens, 3);
  res.loss.backward();
  expectNear(in.logp.grad(), {-1, 0, 0, 0, 0, 0}, 0.0);
}

TEST(PolicyLoss, ShapeMismatchThrowsNamingTheTensor) {
  const auto base = [] { return ratioInputs({1.0, 1.0, 1.0}, 1.0); };
  expectInvalidNaming(
      [&] {
        auto in = base();
        in.logp_behav = torch::zeros({1, 4}, torch::kDouble);
        policyLoss(in, {});
      },
      "logp_behav");
  expectInvalidNaming(
      [&] {
        auto in = base();
        in.mask = torch::ones({3}, torch::kDouble);
        policyLoss(in, {});
      },
      "mask");
  expectInvalidNaming(
      [&] {
        auto in = base();
        in.advantages = vec({1.0, 2.0});
        policyLoss(in, {});
      },
      "advantages");
  PolicyLossOptions decoupled;
  decoupled.decoupled = true;
  expectInvalidNaming([&] { policyLoss(base(), decoupled); }, "logp_prox");
  expectInvalidNaming(
      [&] {
        auto in = base();
        m2poMask(in.logp, in.logp_behav, torch::ones({2, 3}), 0.1);
      },
      "mask");
}

// ---------------------------------------------------------------- tokenLogProbs
TEST(TokenLogProbs, LogSoftmaxGatheredInFloat32) {
  // t0: logits {1, 1, 1} → log(1/3) at token 2 = −1.0986123
  // t1: logits {ln 1, ln 2, ln 5} → softmax {1/8, 2/8, 5/8}; token 1 → ln 0.25 = −1.3862944
  const auto logits = torch::tensor({1.0, 1.0, 1.0, 0.0, std::log(2.0), std::log(5.0)}, torch::kDouble)
                          .reshape({1, 2, 3})
                          .requires_grad_(true);
  const auto lp = tokenLogProbs(logits, torch::tensor({2, 1}, torch::kLong).reshape({1, 2}));
  EXPECT_EQ(lp.scalar_type(), torch::kFloat);
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{1, 2}));
  expectNear(lp, {-std::log(3.0), std::log(0.25)}, 1e-6);
  // d lp / d logits = onehot − softmax: t1 → {−1/8, 1 − 2/8, −5/8}.
  lp.sum().backward();
  expectNear(logits.grad()[0][1], {-0.125, 0.75, -0.625}, 1e-6);
  expectInvalidNaming([&] { tokenLogProbs(logits, torch::tensor({0, 1, 2}, torch::kLong).reshape({1, 3})); }, "tokens");
  expectInvalidNaming(
      [&] {
        tokenLogProbs(logits, torch::tensor({0, 3}, torch::kLong).reshape({1, 2}));
      },
      "out of range");
}

}  // namespace
}  // namespace astraflow
