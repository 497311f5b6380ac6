// The attention forms of a full forward (attention_input.hpp): right-padded rows take the causal
// kernel with no mask, rows padded in front and packed lines (a shared prompt laid out once before
// its responses) attend per span, and each gives the log-probs and gradients of the explicit-mask
// path it replaces; what the spans cannot express falls back to the mask.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include "astraflow/model/policy_model.hpp"

using namespace astraflow;

namespace attention_forms_test {

// The same weights twice: one model as it runs, one through the explicit mask.
struct Pair {
  PolicyModel forms{nullptr}, masked{nullptr};
};

Pair pairOf(int kv_heads, std::uint64_t seed, bool checkpoint = false) {
  const auto m = test_support::tinyModel(40, 32, 2, 4, kv_heads, 48, 32);
  torch::manual_seed(static_cast<std::int64_t>(seed));
  Pair p{PolicyModel(m), PolicyModel(m)};
  p.masked->importTensors(p.forms->orderedParameters());
  p.masked->setExplicitMask(true);
  p.forms->setActivationCheckpointing(checkpoint);
  p.masked->setActivationCheckpointing(checkpoint);
  return p;
}

struct Rows {
  torch::Tensor tokens, positions, valid;
  Segments segments;
};

// Log-softmax of the valid cells, and the gradients of a random weighting of them.
struct Result {
  torch::Tensor logp;
  std::vector<torch::Tensor> grads;
};

Result run(PolicyModel& model, const Rows& r, const torch::Tensor& weights) {
  model->zero_grad();
  const auto logp = torch::log_softmax(model->forward(r.tokens, r.positions, r.valid, r.segments), -1);
  const auto cells = logp.index({r.valid});  // [cells, V]
  (cells * weights).sum().backward();
  Result out{cells.detach(), {}};
  for (const auto& p : model->orderedParameters()) out.grads.push_back(p.tensor.grad().clone());
  return out;
}

void expectSame(Pair& p, const Rows& r, AttentionForm form) {
  EXPECT_EQ(p.forms->attentionInput(r.positions, r.valid, r.segments).form, form);
  EXPECT_EQ(p.masked->attentionInput(r.positions, r.valid, r.segments).form, AttentionForm::Mask);
  const auto weights = torch::randn({r.valid.sum().item<std::int64_t>(), 40});
  const auto a = run(p.forms, r, weights), b = run(p.masked, r, weights);
  EXPECT_LT((a.logp - b.logp).abs().max().item<double>(), 1e-5);
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    const double scale = b.grads[i].abs().max().item<double>();
    EXPECT_LT((a.grads[i] - b.grads[i]).abs().max().item<double>(), 1e-5 * std::max(1.0, scale)) << i;
  }
  // The comparison can fail: another model's log-probs differ.
  torch::manual_seed(99);
  PolicyModel other(p.masked->config());
  const auto c = run(other, r, weights);
  EXPECT_GT((c.logp - b.logp).abs().max().item<double>(), 1e-3);
}

Rows rightPaddedRows() {
  Rows r;
  r.tokens = torch::randint(1, 40, {3, 12}, torch::kLong);
  const auto lengths = torch::tensor({12, 7, 3}, torch::kLong).unsqueeze(1);
  r.positions = torch::arange(12, torch::kLong).unsqueeze(0).expand({3, 12}).contiguous();
  r.valid = r.positions < lengths;
  return r;
}

// Line 0: a prompt (segment 10, cells 0-3), then two responses to it (segments 0 and 1), then
// padding; line 1: two sequences of their own, then padding.
Rows packedLines() {
  Rows r;
  r.tokens = torch::randint(1, 40, {2, 12}, torch::kLong);
  r.positions = torch::tensor({0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 0, 0, 0, 1, 2, 3, 4, 5, 0, 1, 2, 0, 0, 0}).view({2, 12});
  const auto id = torch::tensor({10, 10, 10, 10, 0, 0, 0, 1, 1, 1, -1, -1, 2, 2, 2, 2, 2, 2, 3, 3, 3, -1, -1, -1});
  const auto sees =
      torch::tensor({-2, -2, -2, -2, 10, 10, 10, 10, 10, 10, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2});
  r.segments = Segments(id.view({2, 12}), sees.view({2, 12}));
  r.valid = id.view({2, 12}) >= 0;
  return r;
}

}  // namespace attention_forms_test

using namespace attention_forms_test;

class AttentionForms : public ::testing::TestWithParam<int> {};

TEST_P(AttentionForms, RightPaddedRowsTakeTheCausalKernelWithNoMask) {
  auto p = pairOf(GetParam(), 31);
  expectSame(p, rightPaddedRows(), AttentionForm::Causal);
}

TEST_P(AttentionForms, RowsPaddedInFrontAttendPerSpan) {
  auto p = pairOf(GetParam(), 32);
  Rows r;
  r.tokens = torch::randint(1, 40, {3, 9}, torch::kLong);
  r.tokens.narrow(1, 0, 4).select(0, 1).fill_(0);
  r.tokens.narrow(1, 0, 7).select(0, 2).fill_(0);
  std::tie(r.positions, r.valid) = positionsForLeftPadded(r.tokens, 0);
  const auto spans = attentionSpans(r.valid, {}, {});
  ASSERT_TRUE(spans.defined());
  EXPECT_TRUE(torch::equal(spans, torch::tensor({0, 0, 9, 0, 0, 1, 4, 5, 0, 0, 2, 7, 2, 0, 0}).view({3, 5})));
  expectSame(p, r, AttentionForm::Spans);
}

TEST_P(AttentionForms, PackedLinesWithASharedPromptAttendPerSpan) {
  auto p = pairOf(GetParam(), 33);
  const auto r = packedLines();
  const auto spans = attentionSpans(r.valid, r.segments.id, r.segments.sees);
  ASSERT_TRUE(spans.defined());
  // line, start, length, seen start, seen length: the responses see the prompt's four cells.
  EXPECT_TRUE(torch::equal(
      spans, torch::tensor({0, 4, 3, 0, 4, 0, 7, 3, 0, 4, 0, 0, 4, 0, 0, 1, 0, 6, 0, 0, 1, 6, 3, 0, 0}).view({5, 5})));
  expectSame(p, r, AttentionForm::Spans);
}

TEST_P(AttentionForms, CheckpointedBlocksRecomputeTheSameForm) {
  auto p = pairOf(GetParam(), 34, /*checkpoint=*/true);
  expectSame(p, packedLines(), AttentionForm::Spans);
  expectSame(p, rightPaddedRows(), AttentionForm::Causal);
}

INSTANTIATE_TEST_SUITE_P(Heads, AttentionForms, ::testing::Values(1, 2, 4));

TEST(AttentionForms, WhatSpansCannotSayTakesTheMask) {
  auto p = pairOf(2, 35);
  auto r = packedLines();
  // A segment in two pieces.
  auto split = r.segments.id.clone();
  split[1][3] = 3;
  EXPECT_FALSE(attentionSpans(r.valid, split, r.segments.sees).defined());
  EXPECT_EQ(p.forms->attentionInput(r.positions, r.valid, Segments(split, r.segments.sees)).form, AttentionForm::Mask);
  // A prompt laid out after the responses that see it.
  auto late = r.segments.sees.clone();
  late[1].narrow(0, 0, 6).fill_(3);
  EXPECT_FALSE(attentionSpans(r.valid, r.segments.id, late).defined());
  // A row with a hole in its valid cells.
  auto holed = rightPaddedRows().valid.clone();
  holed[0][5] = false;
  EXPECT_FALSE(rightPadded(holed));
  EXPECT_FALSE(attentionSpans(holed, {}, {}).defined());
  // The KV-cache forward and eager attention keep the mask.
  const auto rows = rightPaddedRows();
  auto cache = p.forms->newCache(3, 16);
  EXPECT_EQ(p.forms->attentionInput(rows.positions, rows.valid, {}, &cache).form, AttentionForm::Mask);
  auto eager_config = p.forms->config();
  eager_config.attention = AttentionKind::Eager;
  PolicyModel eager(eager_config);
  EXPECT_EQ(eager->attentionInput(rows.positions, rows.valid, {}).form, AttentionForm::Mask);
}
