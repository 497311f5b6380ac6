// trainer.shared_prefix (docs/training.md): the rows of a group that share their first tokens go
// through the forward as a tree — the prefix once, each row's own tokens after it. Checked here
// against the padded layout, where every row carries its prefix itself: the shared prefixes
// found, the plan's cells, the log-probs, the gradients (bf16 autocast and activation
// checkpointing included) and whole RL steps of every loss kind, split or not.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "astraflow/trainer/micro_batches.hpp"
#include "astraflow/trainer/policy_trainer.hpp"

using namespace astraflow;

namespace {

ModelConfig treeModel() { return test_support::tinyModel(24, 32, 2, 4, 2, 64, 64); }

// `groups` GRPO-like groups of `per_group` rows: one prompt of 3..40 tokens per group, then each
// row's own 0..20 tokens (the policy's). Group 0's rows are identical; in the last group the
// first row's prompt differs at its first token, so that group shares nothing.
std::vector<TrainingSample> groupedEpisodes(int groups, int per_group, std::uint64_t seed,
                                            std::vector<std::int64_t>& gid) {
  std::mt19937_64 rng(seed);
  std::vector<TrainingSample> eps;
  gid.clear();
  for (int g = 0; g < groups; ++g) {
    std::vector<std::int32_t> prompt(3 + rng() % 38);
    for (auto& t : prompt) t = 1 + static_cast<std::int32_t>(rng() % 23);
    TrainingSample first;
    for (int k = 0; k < per_group; ++k) {
      TrainingSample e;
      e.tokens = prompt;
      e.policy_mask.assign(prompt.size(), 0);
      const int own = static_cast<int>(rng() % 21);
      for (int t = 0; t < own; ++t) {
        e.tokens.push_back(1 + static_cast<std::int32_t>(rng() % 23));
        e.policy_mask.push_back(1);
      }
      if (g == 0 && k > 0) e = first;                                     // identical rows
      if (g == groups - 1 && k == 0) e.tokens[0] = e.tokens[0] % 23 + 1;  // 1..23, never itself
      e.behav_logprobs.assign(e.tokens.size(), 0.f);
      e.reward = static_cast<double>(rng() % 2);
      if (k == 0) first = e;
      eps.push_back(e);
      gid.push_back(100 + g);
    }
  }
  return eps;
}

TrainBatch groupedBatch(PolicyModelImpl& model, int groups, int per_group, std::uint64_t seed) {
  std::vector<std::int64_t> gid;
  TrainBatch b = collate(groupedEpisodes(groups, per_group, seed, gid), gid, 0);
  torch::NoGradGuard ng;
  const auto logp = sequenceLogProbs(model, b.tokens, b.lengths, 1.0);
  b.behav = (logp + 0.05 * torch::randn(logp.sizes())) * b.mask;
  return b;
}

std::vector<std::int64_t> lengthsOf(const TrainBatch& b) {
  return {b.lengths.data_ptr<std::int64_t>(), b.lengths.data_ptr<std::int64_t>() + b.lengths.numel()};
}

std::vector<std::int64_t> allRows(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

PolicyModel cloneModel(PolicyModelImpl& m) {
  PolicyModel out(m.config());
  out->importTensors(m.orderedParameters());
  return out;
}

}  // namespace

// The prefix each row shares is the longest one common to every row of its group, from the
// tensors and from the episodes alike.
TEST(SharedPrefix, FoundPerGroupFromTensorsAndEpisodes) {
  std::vector<std::int64_t> gid;
  const auto eps = groupedEpisodes(6, 5, 3, gid);
  const TrainBatch b = collate(eps, gid, 0);
  const auto from_tensors = findSharedPrefixes(b.tokens, b.lengths, b.group_ids);
  const auto from_episodes = findSharedPrefixes(eps, gid);
  EXPECT_EQ(from_tensors.prefix, from_episodes.prefix);
  EXPECT_EQ(from_tensors.group, gid);
  for (std::size_t r = 0; r < eps.size(); ++r) {
    // Brute force: the longest k that every row of r's group has in common.
    std::size_t k = eps[r].tokens.size();
    for (std::size_t o = 0; o < eps.size(); ++o) {
      if (gid[o] != gid[r]) continue;
      std::size_t j = 0;
      while (j < std::min(k, eps[o].tokens.size()) && eps[o].tokens[j] == eps[r].tokens[j]) ++j;
      k = j;
    }
    EXPECT_EQ(from_tensors.prefix[r], static_cast<std::int64_t>(k)) << "row " << r;
  }
  EXPECT_EQ(from_tensors.prefix[0], static_cast<std::int64_t>(eps[0].tokens.size()));  // identical rows
  EXPECT_EQ(from_tensors.prefix.back(), 0);                                            // the diverging group
}

// Every row's tokens have a cell, a tree's prefix cells are the same for all its rows and no
// other cell is used twice; a tree is never split; budgets hold; the forward takes fewer cells.
TEST(SharedPrefix, PlanLaysEachTreeOnceWithinTheBudget) {
  std::vector<std::int64_t> gid;
  const auto eps = groupedEpisodes(12, 8, 5, gid);
  const TrainBatch b = collate(eps, gid, 0);
  const auto lengths = lengthsOf(b);
  const auto shared = findSharedPrefixes(b.tokens, b.lengths, b.group_ids);
  const auto rows = allRows(b.tokens.size(0));
  for (const bool packed : {false, true}) {
    for (const std::int64_t budget : {0, 300, 700}) {
      const auto plan = planMicroBatches(rows, lengths, budget, packed, &shared);
      std::multiset<std::int64_t> seen;
      std::int64_t cells = 0;
      for (const auto& m : plan) {
        seen.insert(m.rows.begin(), m.rows.end());
        ASSERT_EQ(m.line.size(), m.rows.size());
        std::set<std::int64_t> groups_here;
        for (const auto r : m.rows) groups_here.insert(gid[static_cast<std::size_t>(r)]);
        // Who holds each cell: a row, or a group's prefix.
        std::vector<std::vector<std::int64_t>> owner(static_cast<std::size_t>(m.lines),
                                                     std::vector<std::int64_t>(static_cast<std::size_t>(m.width), -1));
        for (std::size_t i = 0; i < m.rows.size(); ++i) {
          const auto r = static_cast<std::size_t>(m.rows[i]);
          const auto P = m.shared[i];
          if (P > 0) {
            EXPECT_EQ(P, shared.prefix[r]);
          }
          for (std::int64_t t = 0; t < lengths[r]; ++t) {
            const auto c = t < P ? m.shared_offset[i] + t : m.offset[i] + t - P;
            ASSERT_LT(c, m.width);
            auto& o = owner[static_cast<std::size_t>(m.line[i])][static_cast<std::size_t>(c)];
            const std::int64_t who = t < P ? -100 - gid[r] : static_cast<std::int64_t>(r);
            if (t < P && o == who) continue;  // the tree's prefix, laid once
            ASSERT_EQ(o, -1) << "cell used twice";
            o = who;
          }
        }
        if (budget > 0 && m.rows.size() > 8) {
          EXPECT_LE(m.cells(), budget);
        }
        // Trees go first-fit into lines, packed or not: fewer lines than units.
        const auto singles = std::count_if(m.rows.begin(), m.rows.end(),
                                           [&](std::int64_t r) { return gid[static_cast<std::size_t>(r)] == 111; });
        const auto units = static_cast<std::int64_t>(groups_here.size() - groups_here.count(111)) + singles;
        EXPECT_LE(m.lines, units);
        if (budget == 0) {
          EXPECT_LT(m.lines, units);
        }
        cells += m.cells();
      }
      EXPECT_EQ(seen, std::multiset<std::int64_t>(rows.begin(), rows.end()));
      // Trees are whole: a group's rows in one micro-batch (the diverging group aside).
      for (const auto& m : plan) {
        for (const auto r : m.rows) {
          if (gid[static_cast<std::size_t>(r)] == 111) continue;
          for (const auto& other : plan) {
            if (&other == &m) continue;
            for (const auto o : other.rows)
              EXPECT_NE(gid[static_cast<std::size_t>(o)], gid[static_cast<std::size_t>(r)]);
          }
        }
      }
      std::int64_t padded = 0;
      for (const auto& m : planMicroBatches(rows, lengths, budget, packed)) padded += m.cells();
      EXPECT_LT(cells * 2, padded) << "packed " << packed << " budget " << budget << ": " << cells << " against "
                                   << padded;
    }
  }
}

// Log-probs through trees equal the padded whole batch's, at a temperature, in every layout.
TEST(SharedPrefix, LogProbsEqualPadded) {
  torch::manual_seed(13);
  PolicyModel model(treeModel());
  const TrainBatch b = groupedBatch(*model, 7, 6, 14);
  const auto lengths = lengthsOf(b);
  const auto shared = findSharedPrefixes(b.tokens, b.lengths, b.group_ids);
  torch::NoGradGuard ng;
  const auto whole = sequenceLogProbs(*model, b.tokens, b.lengths, 0.7);
  for (const bool packed : {false, true}) {
    for (const std::int64_t budget : {0, 250}) {
      const auto plan = planMicroBatches(allRows(b.tokens.size(0)), lengths, budget, packed, &shared);
      for (const auto& m : plan) {
        const auto logp = microBatchLogProbs(*model, m, b.tokens, b.lengths, 0.7);
        const auto expected = whole.index_select(0, rowIndex(m.rows, torch::kCPU)).narrow(1, 0, logp.size(1));
        EXPECT_TRUE(logp.allclose(expected, 1e-5, 1e-5))
            << "packed " << packed << " budget " << budget << ": max |diff| "
            << (logp - expected).abs().max().item<double>();
      }
    }
  }
}

// A short prompt with long answers: by the attention's cost (pair_cost) a tree stops growing when
// the next row costs less alone, so a group becomes several small trees, still exact.
TEST(SharedPrefix, LongAnswersSplitTheTreeByCost) {
  std::mt19937_64 rng(9);
  std::vector<TrainingSample> eps;
  std::vector<std::int64_t> gid;
  for (int g = 0; g < 3; ++g) {
    const std::vector<std::int32_t> prompt{1, 2, 3, static_cast<std::int32_t>(4 + g)};
    for (int k = 0; k < 6; ++k) {
      TrainingSample e;
      e.tokens = prompt;
      e.policy_mask.assign(prompt.size(), 0);
      for (int t = 0; t < 40; ++t) {
        e.tokens.push_back(1 + static_cast<std::int32_t>(rng() % 23));
        e.policy_mask.push_back(1);
      }
      e.behav_logprobs.assign(e.tokens.size(), 0.f);
      eps.push_back(e);
      gid.push_back(g);
    }
  }
  const TrainBatch b = collate(eps, gid, 0);
  auto shared = findSharedPrefixes(b.tokens, b.lengths, b.group_ids);
  // 44-token rows sharing 4: two rows cost 84 + 0.001 × 84² = 91.1 < 2 × (44 + 0.001 × 44²) =
  // 91.9, a third 139.4 > 91.1 + 45.9: trees of two.
  shared.pair_cost = 0.001;
  const auto plan = planMicroBatches(allRows(b.tokens.size(0)), lengthsOf(b), 0, false, &shared);
  ASSERT_EQ(plan.size(), 1u);
  const auto& m = plan.front();
  std::map<std::pair<std::int64_t, std::int64_t>, int> tree_rows;  // (line, prefix offset) -> rows
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    EXPECT_EQ(m.shared[i], 4);
    tree_rows[{m.line[i], m.shared_offset[i]}]++;
  }
  EXPECT_EQ(tree_rows.size(), 9u);  // 3 groups × 3 trees
  for (const auto& [at, n] : tree_rows) EXPECT_EQ(n, 2);
  // A cost that long lines never pay back: no tree at all; no cost: one tree a group.
  shared.pair_cost = 0.01;
  EXPECT_TRUE(planMicroBatches(allRows(b.tokens.size(0)), lengthsOf(b), 0, false, &shared).front().line.empty());
  shared.pair_cost = 0;
  EXPECT_EQ(planMicroBatches(allRows(b.tokens.size(0)), lengthsOf(b), 0, false, &shared).front().width, 4 + 6 * 40);
  // Split trees are as exact as whole ones.
  torch::manual_seed(19);
  PolicyModel model(treeModel());
  torch::NoGradGuard ng;
  const auto whole = sequenceLogProbs(*model, b.tokens, b.lengths, 1.0);
  const auto logp = microBatchLogProbs(*model, m, b.tokens, b.lengths, 1.0);
  const auto expected = whole.index_select(0, rowIndex(m.rows, torch::kCPU)).narrow(1, 0, logp.size(1));
  EXPECT_TRUE(logp.allclose(expected, 1e-5, 1e-5)) << (logp - expected).abs().max().item<double>();
  // The model's own cost: a tiny model's attention is dear per pair, a real one's cheap.
  EXPECT_GT(attentionPairCost(treeModel()), attentionPairCost(test_support::tinyModel(1000, 512, 8, 8, 4, 1536, 64)));
  // Trees are costed by that only where attention takes the explicit mask (eager); sdpa attends per
  // span, where a row costs the same attention in a tree as alone.
  auto eager = treeModel();
  eager.attention = AttentionKind::Eager;
  EXPECT_EQ(treePairCost(eager), attentionPairCost(eager));
  EXPECT_GT(treePairCost(eager), 0.0);
  EXPECT_EQ(treePairCost(treeModel()), 0.0);
}

// The gradient of a weighted sum of log-probs through trees equals the padded one's: the shared
// prefix collects every row's gradient. fp32 and bf16 autocast, with activation checkpointing.
TEST(SharedPrefix, GradientsEqualPadded) {
  for (const bool bf16 : {false, true}) {
    torch::manual_seed(17);
    PolicyModel padded(treeModel());
    PolicyModel tree = cloneModel(*padded);
    PolicyModel tree_ckpt = cloneModel(*padded);
    tree_ckpt->setActivationCheckpointing(true);
    const TrainBatch b = groupedBatch(*padded, 4, 5, 18);
    const auto weights = torch::randn(b.tokens.sizes()) * b.mask;
    const auto shared = findSharedPrefixes(b.tokens, b.lengths, b.group_ids);
    const auto rows = allRows(b.tokens.size(0));
    for (auto* m : {&padded, &tree, &tree_ckpt}) {
      at::autocast::set_autocast_enabled(at::kCPU, bf16);
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      const auto plan = planMicroBatches(rows, lengthsOf(b), 0, false, m == &padded ? nullptr : &shared);
      ASSERT_EQ(plan.size(), 1u);
      EXPECT_EQ(plan.front().line.empty(), m == &padded);
      const auto logp = microBatchLogProbs(**m, plan.front(), b.tokens, b.lengths, 1.0);
      const auto order = rowIndex(plan.front().rows, torch::kCPU);
      (logp * weights.index_select(0, order).narrow(1, 0, logp.size(1))).sum().backward();
      at::autocast::set_autocast_enabled(at::kCPU, false);
      at::autocast::clear_cache();
    }
    const auto pp = padded->orderedParameters();
    for (auto* m : {&tree, &tree_ckpt}) {
      const auto pt = (*m)->orderedParameters();
      for (std::size_t i = 0; i < pp.size(); ++i) {
        ASSERT_TRUE(pt[i].tensor.grad().defined()) << pt[i].name;
        // bf16: within 1 % of the tensor's largest gradient (bf16 keeps 8 bits; the padded and
        // the tree layouts attend in calls of different lengths, so they round differently: 0.25 %
        // measured); a wrong tree is off by the gradient's own size.
        const double diff = (pp[i].tensor.grad() - pt[i].tensor.grad()).abs().max().item<double>();
        const double scale = pp[i].tensor.grad().abs().max().item<double>();
        if (bf16) {
          EXPECT_LT(diff, 1e-2 * std::max(1.0, scale)) << pp[i].name << ": max |grad| " << scale;
        } else {
          EXPECT_TRUE(pp[i].tensor.grad().allclose(pt[i].tensor.grad(), 1e-5, 1e-5))
              << pp[i].name << ": max |diff| " << diff;
        }
      }
    }
  }
}

struct TreeCase {
  const char* name;
  LossKind kind;
  bool m2po;
  double kl;
  int mini_batches;
  std::int64_t micro_batch_tokens;
};

void PrintTo(const TreeCase& c, std::ostream* os) { *os << c.name; }

class SharedPrefixStep : public ::testing::TestWithParam<TreeCase> {};

// Whole RL steps (2 batches of 2 PPO epochs) with and without trainer.shared_prefix reach the
// same weights and figures, while the forward takes fewer cells. The tolerances are float
// rounding carried through up to 12 AdamW steps at lr 0.01: packing the same rows without
// sharing (trainer.packing) differs from padded by as much (4.6e-5 in max_abs_behav_diff).
TEST_P(SharedPrefixStep, SameWeightsAsPadded) {
  const TreeCase tc = GetParam();
  torch::manual_seed(23);
  PolicyModel a(treeModel());
  PolicyModel b = cloneModel(*a);
  TrainerSection t;
  t.lr = 0.01;
  t.ppo_epochs = 2;
  t.mini_batches = tc.mini_batches;
  t.micro_batch_tokens = tc.micro_batch_tokens;
  t.loss.kind = tc.kind;
  t.loss.m2po = tc.m2po;
  t.loss.m2_threshold = 0.001;
  t.loss.kl_coef = tc.kl;
  TrainerSection plain = t;
  plain.shared_prefix = false;
  const TrainBatch batch = groupedBatch(*a, 6, 8, 24);
  PolicyTrainer with(a, t, 1.0), without(b, plain, 1.0);
  for (int step = 0; step < 2; ++step) {
    const RlStepStats sw = with.rlStep(batch), sp = without.rlStep(batch);
    EXPECT_EQ(sw.tokens, sp.tokens);
    EXPECT_NEAR(sw.loss, sp.loss, 1e-5);
    EXPECT_NEAR(sw.kl, sp.kl, 1e-5);
    EXPECT_NEAR(sw.clipped_fraction, sp.clipped_fraction, 1e-9);
    EXPECT_NEAR(sw.m2po_masked_fraction, sp.m2po_masked_fraction, 1e-9);
    EXPECT_NEAR(sw.max_abs_behav_diff, sp.max_abs_behav_diff, 2e-4);
    EXPECT_EQ(sw.sequence_tokens, sp.sequence_tokens);
    EXPECT_LT(sw.forward_tokens * 2, sp.forward_tokens);
    if (!tc.m2po) {
      EXPECT_GT(sw.clipped_fraction, 0.0);
    }
  }
  const auto pa = a->orderedParameters(), pb = b->orderedParameters();
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, (pa[i].tensor - pb[i].tensor).abs().max().item<double>());
  EXPECT_LT(worst, 3e-4) << tc.name;
}

INSTANTIATE_TEST_SUITE_P(Losses, SharedPrefixStep,
                         ::testing::Values(TreeCase{"ppo", LossKind::Ppo, false, 0.0, 1, 0},
                                           TreeCase{"ppo_split", LossKind::Ppo, false, 0.0, 1, 400},
                                           TreeCase{"decoupled_kl_minibatches", LossKind::Decoupled, false, 0.05, 3, 0},
                                           TreeCase{"decoupled_m2po_split", LossKind::Decoupled, true, 0.0, 1, 400}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });
