// Trainer at scale (docs/training.md): micro-batch plans, the packed layout against the padded
// one, gradient accumulation against the unsplit step (1 vs 7 micro-batches, every loss kind,
// padded and packed), PPO mini-batches against a step-by-step reference built from the loss
// functions, and activation checkpointing against the plain backward.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include <ATen/autocast_mode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <random>
#include <set>

#include "astraflow/trainer/loss.hpp"
#include "astraflow/trainer/micro_batches.hpp"
#include "astraflow/trainer/policy_trainer.hpp"

using namespace astraflow;

namespace {

ModelConfig small() { return test_support::tinyModel(24, 32, 2, 4, 2, 48, 40); }

// A batch of `groups` × 4 episodes of lengths 4..30: a prompt of 2..5 tokens, then the policy's
// tokens; behaviour log-probs near what `model` gives them (so ratios stay near 1, and a few
// clip), rewards 0/1.
TrainBatch randomBatch(PolicyModelImpl& model, int groups, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TrainingSample> eps;
  std::vector<std::int64_t> gid;
  for (int g = 0; g < groups; ++g) {
    for (int k = 0; k < 4; ++k) {
      TrainingSample e;
      const int prompt = 2 + static_cast<int>(rng() % 4), len = 4 + static_cast<int>(rng() % 27);
      for (int t = 0; t < len; ++t) {
        e.tokens.push_back(1 + static_cast<std::int32_t>(rng() % 23));
        e.policy_mask.push_back(t >= prompt ? 1 : 0);
        e.behav_logprobs.push_back(0.f);
      }
      e.reward = static_cast<double>(rng() % 2);
      eps.push_back(e);
      gid.push_back(g);
    }
  }
  TrainBatch b = collate(eps, gid, 0);
  torch::NoGradGuard ng;
  const auto logp = sequenceLogProbs(model, b.tokens, b.lengths, 1.0);
  b.behav = (logp + 0.05 * torch::randn(logp.sizes(), torch::TensorOptions().dtype(torch::kFloat32))) * b.mask;
  return b;
}

std::vector<std::int64_t> hostLengths(const TrainBatch& b) {
  return {b.lengths.data_ptr<std::int64_t>(), b.lengths.data_ptr<std::int64_t>() + b.lengths.numel()};
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

// The largest budget that makes exactly `count` micro-batches of `rows` (0 if none does).
std::int64_t budgetFor(int count, const std::vector<std::int64_t>& lengths, bool packed) {
  for (std::int64_t budget = 4096; budget > 0; --budget) {
    if (planMicroBatches(iota(static_cast<std::int64_t>(lengths.size())), lengths, budget, packed).size() ==
        static_cast<std::size_t>(count))
      return budget;
  }
  return 0;
}

double maxWeightDiff(PolicyModelImpl& a, PolicyModelImpl& b) {
  double worst = 0;
  const auto pa = a.orderedParameters(), pb = b.orderedParameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, (pa[i].tensor - pb[i].tensor).abs().max().item<double>());
  return worst;
}

PolicyModel copyOf(PolicyModelImpl& m) {
  PolicyModel out(m.config());
  out->importTensors(m.orderedParameters());
  return out;
}

}  // namespace

TEST(MicroBatchPlan, BudgetHoldsEveryRowOnceLongestFirst) {
  std::mt19937_64 rng(5);
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < 50; ++i) lengths.push_back(1 + static_cast<std::int64_t>(rng() % 40));
  lengths[7] = 90;  // longer than the budget: alone
  for (const bool packed : {false, true}) {
    const auto plan = planMicroBatches(iota(50), lengths, 80, packed);
    std::multiset<std::int64_t> seen;
    std::int64_t cells = 0;
    for (const auto& m : plan) {
      seen.insert(m.rows.begin(), m.rows.end());
      EXPECT_EQ(m.width, lengths[static_cast<std::size_t>(m.rows.front())]);
      for (const auto r : m.rows) EXPECT_LE(lengths[static_cast<std::size_t>(r)], m.width);
      if (m.rows.front() == 7) {
        EXPECT_EQ(m.rows.size(), 1u);
      } else {
        EXPECT_LE(m.cells(), 80) << "packed " << packed;
      }
      if (packed) {
        // Lines are filled without overlap and within the width.
        std::vector<std::vector<int>> used(static_cast<std::size_t>(m.lines),
                                           std::vector<int>(static_cast<std::size_t>(m.width), 0));
        for (std::size_t i = 0; i < m.rows.size(); ++i) {
          for (std::int64_t t = 0; t < lengths[static_cast<std::size_t>(m.rows[i])]; ++t)
            ASSERT_EQ(used[static_cast<std::size_t>(m.line[i])][static_cast<std::size_t>(m.offset[i] + t)]++, 0);
        }
      } else {
        EXPECT_EQ(m.lines, static_cast<std::int64_t>(m.rows.size()));
      }
      cells += m.cells();
    }
    const auto all = iota(50);
    EXPECT_EQ(seen, std::multiset<std::int64_t>(all.begin(), all.end()));
    EXPECT_EQ(planMicroBatches(iota(50), lengths, 0, packed).size(), 1u);
  }
  // Packing needs fewer cells than padding for the same rows in one micro-batch.
  EXPECT_LT(planMicroBatches(iota(50), lengths, 0, true).front().cells(),
            planMicroBatches(iota(50), lengths, 0, false).front().cells());
}

// Packed lines (sequences back to back, attention within each, positions from 0) give each
// sequence the log-probs the padded layout gives it, and both those of the whole batch.
TEST(MicroBatchLayout, PackedLogProbsEqualPadded) {
  torch::manual_seed(11);
  PolicyModel model(small());
  const TrainBatch b = randomBatch(*model, 5, 12);
  const auto lengths = hostLengths(b);
  torch::NoGradGuard ng;
  const auto whole = sequenceLogProbs(*model, b.tokens, b.lengths, 0.7);
  for (const bool packed : {false, true}) {
    const auto plan = planMicroBatches(iota(b.tokens.size(0)), lengths, 120, packed);
    ASSERT_GT(plan.size(), 2u);
    std::int64_t lines = 0;
    for (const auto& m : plan) {
      lines += m.lines;
      const auto logp = microBatchLogProbs(*model, m, b.tokens, b.lengths, 0.7);
      const auto expected = whole.index_select(0, rowIndex(m.rows, torch::kCPU)).narrow(1, 0, m.width);
      EXPECT_TRUE(logp.allclose(expected, 1e-5, 1e-5))
          << "packed " << packed << ": max |diff| " << (logp - expected).abs().max().item<double>();
    }
    if (packed) {
      EXPECT_LT(lines, b.tokens.size(0));  // some lines hold several sequences
    }
  }
}

struct LossCase {
  const char* name;
  LossKind kind;
  bool m2po;
  double kl;
  bool packed;
};

void PrintTo(const LossCase& c, std::ostream* os) { *os << c.name; }

class Accumulation : public ::testing::TestWithParam<LossCase> {};

// One step over the whole batch and the same step in 7 micro-batches reach the same weights
// (two RL batches of 2 PPO epochs each, so the ratio moves off 1 and clipping acts).
TEST_P(Accumulation, SevenMicroBatchesGiveTheUnsplitWeights) {
  const LossCase lc = GetParam();
  torch::manual_seed(21);
  PolicyModel a(small());
  PolicyModel b = copyOf(*a);
  TrainerSection t;
  t.lr = 0.01;
  t.ppo_epochs = 2;
  t.loss.kind = lc.kind;
  t.loss.m2po = lc.m2po;
  t.loss.m2_threshold = 0.001;  // low enough to remove tokens here
  t.loss.kl_coef = lc.kl;
  t.packing = lc.packed;
  const TrainBatch batch = randomBatch(*a, 6, 22);
  TrainerSection split = t;
  split.micro_batch_tokens = budgetFor(7, hostLengths(batch), lc.packed);
  ASSERT_GT(split.micro_batch_tokens, 0);
  PolicyTrainer whole(a, t, 1.0), parts(b, split, 1.0);
  for (int step = 0; step < 2; ++step) {
    const RlStepStats sw = whole.rlStep(batch), sp = parts.rlStep(batch);
    EXPECT_EQ(sw.micro_batches, 2);  // one per PPO epoch
    EXPECT_EQ(sp.micro_batches, 14);
    EXPECT_EQ(sw.tokens, sp.tokens);
    EXPECT_NEAR(sw.loss, sp.loss, 1e-5);
    EXPECT_NEAR(sw.kl, sp.kl, 1e-6);
    EXPECT_NEAR(sw.clipped_fraction, sp.clipped_fraction, 1e-9);
    EXPECT_NEAR(sw.m2po_masked_fraction, sp.m2po_masked_fraction, 1e-9);
    EXPECT_NEAR(sw.max_abs_behav_diff, sp.max_abs_behav_diff, 1e-5);
    if (lc.m2po) {
      EXPECT_GT(sw.m2po_masked_fraction, 0.0);
    } else {
      EXPECT_GT(sw.clipped_fraction, 0.0);
    }
    EXPECT_EQ(sw.sequence_tokens, sp.sequence_tokens);
    EXPECT_GE(sp.forward_tokens, sp.sequence_tokens);
  }
  const double diff = maxWeightDiff(*a, *b);
  EXPECT_LT(diff, 2e-5) << lc.name;
}

INSTANTIATE_TEST_SUITE_P(Losses, Accumulation,
                         ::testing::Values(LossCase{"ppo", LossKind::Ppo, false, 0.0, false},
                                           LossCase{"ppo_packed", LossKind::Ppo, false, 0.0, true},
                                           LossCase{"decoupled_kl", LossKind::Decoupled, false, 0.05, false},
                                           LossCase{"decoupled_m2po_packed", LossKind::Decoupled, true, 0.0, true},
                                           LossCase{"ppo_m2po", LossKind::Ppo, true, 0.0, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// trainer.mini_batches: each PPO pass takes one optimiser step per shuffled slice, every slice's
// behaviour and proximal log-probs those of the batch's start, advantages over the whole batch.
// Checked against the same steps made here from the loss functions and an AdamW of our own.
TEST(MiniBatches, StepsOverSlicesWithTheBatchStartsLogProbs) {
  torch::manual_seed(31);
  PolicyModel a(small());
  PolicyModel ref = copyOf(*a);
  TrainerSection t;
  t.lr = 0.01;
  t.mini_batches = 3;
  t.ppo_epochs = 2;
  t.loss.kind = LossKind::Decoupled;
  const TrainBatch batch = randomBatch(*a, 4, 32);  // 16 sequences: slices of 5, 5, 6
  const auto B = batch.tokens.size(0);
  PolicyTrainer trainer(a, t, 1.0);
  const RlStepStats s = trainer.rlStep(batch);
  EXPECT_EQ(trainer.optimizerSteps(), 6);
  EXPECT_EQ(s.micro_batches, 6);

  // The reference: each pass's slices cut from miniBatchOrder.
  torch::optim::AdamWOptions opts(t.lr);
  opts.betas({t.beta1, t.beta2});
  opts.weight_decay(t.weight_decay);
  torch::optim::AdamW adam(ref->parameters(), opts);
  const auto adv = groupAdvantages(batch.rewards, batch.group_ids);
  torch::Tensor prox;
  {
    torch::NoGradGuard ng;
    prox = sequenceLogProbs(*ref, batch.tokens, batch.lengths, 1.0);
  }
  PolicyLossOptions lo;
  lo.clip_low = t.loss.clip_low;
  lo.clip_high = t.loss.clip_high;
  lo.decoupled = true;
  std::set<std::int64_t> covered;
  for (int pass = 0; pass < 2; ++pass) {
    const auto order = miniBatchOrder(B, pass * 3);
    ASSERT_EQ(static_cast<std::int64_t>(order.size()), B);
    for (int k = 0; k < 3; ++k) {
      std::vector<std::int64_t> rows(order.begin() + B * k / 3, order.begin() + B * (k + 1) / 3);
      if (pass == 0) covered.insert(rows.begin(), rows.end());
      const auto idx = rowIndex(rows, torch::kCPU);
      PolicyLossInputs in;
      in.logp = sequenceLogProbs(*ref, batch.tokens.index_select(0, idx), batch.lengths.index_select(0, idx), 1.0);
      in.logp_behav = batch.behav.index_select(0, idx);
      in.logp_prox = prox.index_select(0, idx);
      in.advantages = adv.index_select(0, idx);
      in.mask = batch.mask.index_select(0, idx);
      adam.zero_grad();
      policyLoss(in, lo).loss.backward();
      torch::nn::utils::clip_grad_norm_(ref->parameters(), t.grad_clip);
      adam.step();
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(covered.size()), B);  // a pass covers every sequence once
  EXPECT_NE(miniBatchOrder(B, 0), miniBatchOrder(B, 3));    // and passes shuffle anew
  EXPECT_LT(maxWeightDiff(*a, *ref), 2e-5);
}

// Activation checkpointing recomputes each block in the backward: the same gradients as the
// plain backward, with autocast to bf16 too, and through packed segments.
TEST(ActivationCheckpointing, SameGradientsAsWithout) {
  for (const bool bf16 : {false, true}) {
    torch::manual_seed(41);
    PolicyModel plain(small());
    PolicyModel ckpt = copyOf(*plain);
    ckpt->setActivationCheckpointing(true);
    const TrainBatch b = randomBatch(*plain, 3, 42);
    const auto weights = torch::randn(b.tokens.sizes());
    const auto plan = planMicroBatches(iota(b.tokens.size(0)), hostLengths(b), 0, true);
    for (auto* m : {&plain, &ckpt}) {
      at::autocast::set_autocast_enabled(at::kCPU, bf16);
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      const auto logp = microBatchLogProbs(**m, plan.front(), b.tokens, b.lengths, 1.0);
      const auto order = rowIndex(plan.front().rows, torch::kCPU);
      (logp * weights.index_select(0, order).narrow(1, 0, logp.size(1))).sum().backward();
      at::autocast::set_autocast_enabled(at::kCPU, false);
      at::autocast::clear_cache();
    }
    const auto pp = plain->orderedParameters(), pc = ckpt->orderedParameters();
    for (std::size_t i = 0; i < pp.size(); ++i) {
      ASSERT_TRUE(pc[i].tensor.grad().defined()) << pc[i].name;
      const double tol = bf16 ? 1e-3 : 1e-6;
      EXPECT_TRUE(pp[i].tensor.grad().allclose(pc[i].tensor.grad(), tol, tol))
          << pp[i].name << " bf16 " << bf16 << ": max |diff| "
          << (pp[i].tensor.grad() - pc[i].tensor.grad()).abs().max().item<double>();
    }
  }
}
