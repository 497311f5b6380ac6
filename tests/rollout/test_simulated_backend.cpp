// The simulated generation backend (docs/simulation.md): its lengths follow the configured
// distribution (checked on many draws against the distribution's own median, mean or support),
// grow with the version, are cut by max_new_tokens and the context; its rewards follow the
// success rate; its modelled time is that of continuous batching.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "astraflow/rollout/simulated_backend.hpp"

using namespace astraflow;

namespace {

std::vector<int> draws(SimulatedBackend& b, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(b.drawLength());
  return out;
}

double median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double mean(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

TEST(SimulatedBackend, LengthsFollowTheConfiguredDistribution) {
  SimulatedBackendSpec spec;
  spec.max_tokens = 1 << 20;
  spec.lengths = SimulatedBackendSpec::Lengths::Lognormal;
  spec.median = 300;
  spec.sigma = 1.0;
  SimulatedBackend lognormal(spec, 1 << 20, 100, {0}, 1);
  auto v = draws(lognormal, 20000);
  EXPECT_NEAR(median(v), 300.0, 300.0 * 0.04);
  // The log-lengths' spread is sigma.
  double m = 0, s = 0;
  for (int x : v) m += std::log(x);
  m /= static_cast<double>(v.size());
  for (int x : v) s += (std::log(x) - m) * (std::log(x) - m);
  EXPECT_NEAR(std::sqrt(s / static_cast<double>(v.size())), 1.0, 0.03);

  spec.lengths = SimulatedBackendSpec::Lengths::Geometric;
  spec.mean = 50;
  SimulatedBackend geometric(spec, 1 << 20, 100, {0}, 2);
  v = draws(geometric, 20000);
  EXPECT_NEAR(mean(v), 50.0, 50.0 * 0.04);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 1);

  spec.lengths = SimulatedBackendSpec::Lengths::Fixed;
  spec.mean = 17;
  SimulatedBackend fixed(spec, 1 << 20, 100, {0}, 3);
  v = draws(fixed, 100);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 17);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 17);

  // Empirical: only the run's own lengths, each drawn.
  spec.lengths = SimulatedBackendSpec::Lengths::Empirical;
  spec.samples = {3, 9, 27, 81};
  SimulatedBackend empirical(spec, 1 << 20, 100, {0}, 4);
  v = draws(empirical, 400);
  EXPECT_EQ(std::set<int>(v.begin(), v.end()), (std::set<int>{3, 9, 27, 81}));

  // Clamped to [min, max]; scaled by 1 + growth × version.
  spec.lengths = SimulatedBackendSpec::Lengths::Lognormal;
  spec.min_tokens = 100;
  spec.max_tokens = 400;
  spec.growth_per_version = 0.5;
  SimulatedBackend clamped(spec, 1 << 20, 100, {0}, 5);
  v = draws(clamped, 2000);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 100);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 400);
  spec.min_tokens = 1;
  spec.max_tokens = 1 << 20;
  SimulatedBackend growing(spec, 1 << 20, 100, {0}, 6);
  const double before = median(draws(growing, 20000));
  growing.setVersion(2);  // × 2
  EXPECT_NEAR(median(draws(growing, 20000)) / before, 2.0, 0.1);
}

TEST(SimulatedBackend, RowsAreCutRewardedAndTimedAsConfigured) {
  SimulatedBackendSpec spec;
  spec.lengths = SimulatedBackendSpec::Lengths::Fixed;
  spec.mean = 10;
  spec.decode_tokens_per_second = 1e5;  // the call sleeps little
  spec.success_rate = 0.25;
  spec.success_gain_per_version = 0.05;
  spec.success_max = 0.9;
  SimulatedBackend b(spec, 40, 50, {0, 1}, 7);
  SamplingOptions opts;
  opts.max_new_tokens = 16;
  opts.stop_token_ids = {2};
  const std::vector<std::vector<std::int32_t>> prompts(400, std::vector<std::int32_t>(8, 5));
  auto gens = b.generate(prompts, opts);
  double rewarded = 0;
  for (const auto& g : gens) {
    ASSERT_EQ(g.tokens.size(), 10u);
    ASSERT_EQ(g.logprobs.size(), 10u);
    EXPECT_TRUE(g.stopped);
    EXPECT_EQ(g.tokens.back(), 2);
    for (std::size_t t = 0; t + 1 < g.tokens.size(); ++t) {
      EXPECT_GE(g.tokens[t], 2);  // never the banned ids 0 and 1
      EXPECT_LT(g.tokens[t], 50);
    }
    for (float lp : g.logprobs) EXPECT_TRUE(std::isfinite(lp) && lp <= 0);
    ASSERT_TRUE(g.reward.has_value());
    rewarded += *g.reward;
  }
  EXPECT_NEAR(rewarded / 400, 0.25, 0.07);
  b.setVersion(100);  // the rate rises with the version, up to success_max
  EXPECT_DOUBLE_EQ(b.successRate(), 0.9);
  // Cut by max_new_tokens and by the context: not stopped, no reward.
  opts.max_new_tokens = 6;
  auto cut = b.generate({std::vector<std::int32_t>(8, 5), std::vector<std::int32_t>(36, 5)}, opts);
  EXPECT_EQ(cut[0].tokens.size(), 6u);
  EXPECT_EQ(cut[1].tokens.size(), 4u);  // 40 − 36
  for (const auto& g : cut) {
    EXPECT_FALSE(g.stopped);
    EXPECT_FALSE(g.reward.has_value());
  }
  EXPECT_EQ(b.stats().generations, 402u);
}

TEST(SimulatedBackend, ModelledTimeFollowsTheBatching) {
  SimulatedBackendSpec spec;
  spec.prefill_tokens_per_second = 1000;
  spec.decode_tokens_per_second = 10;
  spec.batch_limit = 4;
  spec.batch_slowdown = 0.5;
  // One sequence: its prompt, then its tokens one step each.
  EXPECT_DOUBLE_EQ(SimulatedBackend::modeledSeconds(spec, {100}, {20}), 0.1 + 20 * 0.1);
  // Four together: each step is 1 + 0.5 × 3 = 2.5 times slower, and they share the steps.
  EXPECT_DOUBLE_EQ(SimulatedBackend::modeledSeconds(spec, {100, 100, 100, 100}, {20, 20, 20, 20}), 0.4 + 20 * 0.25);
  // Uneven: 4 in flight for 5 steps, then 3 for 5, then 1 for 10.
  EXPECT_NEAR(SimulatedBackend::modeledSeconds(spec, {0, 0, 0, 0}, {5, 10, 10, 20}), 5 * 0.25 + 5 * 0.2 + 10 * 0.1,
              1e-12);
  // Past the batch limit the fifth waits for a slot: 4 in flight for 10 steps, then it alone.
  EXPECT_NEAR(SimulatedBackend::modeledSeconds(spec, {0, 0, 0, 0, 0}, {10, 10, 10, 10, 10}), 10 * 0.25 + 10 * 0.1,
              1e-12);

  // Static batching, as the engine: the rows step together until the longest ends, so the
  // uneven four cost 20 steps of four, and past the limit the fifth row is a second batch.
  spec.batching = SimulatedBackendSpec::Batching::Static;
  EXPECT_DOUBLE_EQ(SimulatedBackend::modeledSeconds(spec, {100}, {20}), 0.1 + 20 * 0.1);
  EXPECT_NEAR(SimulatedBackend::modeledSeconds(spec, {0, 0, 0, 0}, {5, 10, 10, 20}), 20 * 0.25, 1e-12);
  EXPECT_NEAR(SimulatedBackend::modeledSeconds(spec, {100, 0, 0, 0, 0}, {10, 10, 10, 30, 7}), 0.1 + 30 * 0.25 + 7 * 0.1,
              1e-12);
}

namespace {

std::vector<FinishedSequence> drain(SimulatedSequences& s) {
  std::vector<FinishedSequence> out;
  while (!s.idle()) {
    for (auto& f : s.step()) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

// Per episode (batching continuous): sequences submitted together cost what one call of them
// costs in the continuous model, whatever the step granularity; a sequence that ends frees its
// slot at once; lengths, stops and rewards are those of the call.
TEST(SimulatedSequences, SubmittedTogetherTheyCostWhatOneContinuousCallCosts) {
  for (const double max_step : {1e-4, 0.05, 10.0}) {
    SimulatedBackendSpec spec;
    spec.lengths = SimulatedBackendSpec::Lengths::Lognormal;
    spec.median = 30;
    spec.sigma = 1.0;
    spec.max_tokens = 400;
    spec.prefill_tokens_per_second = 1e6;
    spec.decode_tokens_per_second = 1e5;
    spec.batch_limit = 5;
    spec.batch_slowdown = 0.3;
    SimulatedBackend b(spec, 300, 50, {0, 1}, 11);
    SimulatedSequences s(b, max_step);
    SamplingOptions opts;
    opts.max_new_tokens = 60;
    opts.stop_token_ids = {2};
    std::vector<int> prompts;
    std::vector<SequenceId> ids;
    for (int i = 0; i < 23; ++i) {
      prompts.push_back(10 + i * 7);
      SequenceRequest r;
      r.prompt.assign(static_cast<std::size_t>(prompts.back()), 5);
      r.options = opts;
      ids.push_back(s.submit(std::move(r)));
    }
    auto done = drain(s);
    ASSERT_EQ(done.size(), ids.size());
    std::vector<int> lengths(ids.size(), -1);
    bool cut = false;
    for (const auto& f : done) {
      const auto i = static_cast<std::size_t>(std::find(ids.begin(), ids.end(), f.id) - ids.begin());
      ASSERT_LT(i, ids.size());
      const auto& g = f.generation;
      lengths[i] = static_cast<int>(g.tokens.size());
      ASSERT_EQ(g.logprobs.size(), g.tokens.size());
      // Stopped rows end on the stop token with a reward; rows cut at max_new_tokens or the
      // context have neither.
      EXPECT_EQ(g.stopped, g.reward.has_value());
      if (g.stopped) {
        EXPECT_EQ(g.tokens.back(), 2);
      }
      const int room = std::min(60, 300 - prompts[i]);
      if (!g.stopped) {
        EXPECT_EQ(lengths[i], room);
        cut = true;
      }
      EXPECT_LE(lengths[i], room);
    }
    EXPECT_TRUE(cut) << "the draw reaches the cap at least once";
    EXPECT_NEAR(b.stats().modeled_seconds, SimulatedBackend::modeledSeconds(spec, prompts, lengths),
                1e-9 * b.stats().modeled_seconds)
        << "max_step " << max_step;
    EXPECT_EQ(b.stats().generations, ids.size());
  }
}

// A sequence admitted while others run joins them at the next step; each token records the
// version set before the step that made it; on_token can end a sequence.
TEST(SimulatedSequences, JoinsAtTheNextStepAndRecordsEachTokensVersion) {
  SimulatedBackendSpec spec;
  spec.lengths = SimulatedBackendSpec::Lengths::Fixed;
  spec.mean = 40;
  spec.decode_tokens_per_second = 1e5;
  spec.batch_limit = 8;
  spec.batch_slowdown = 0;
  SimulatedBackend b(spec, 100, 50, {0, 1}, 3);
  // 10 decode steps of modelled time per step().
  SimulatedSequences s(b, 10 / spec.decode_tokens_per_second);
  SamplingOptions opts;
  opts.max_new_tokens = 64;
  opts.stop_token_ids = {2};
  auto request = [&] {
    SequenceRequest r;
    r.prompt = {5, 6, 7};
    r.options = opts;
    return r;
  };
  s.weightsChanged(3);
  const SequenceId first = s.submit(request());
  EXPECT_TRUE(s.step().empty());  // 10 tokens under version 3
  s.weightsChanged(4);
  const SequenceId second = s.submit(request());
  SequenceRequest cut = request();
  int seen = 0;
  cut.on_token = [&seen](std::int32_t, float) { return ++seen < 5; };
  const SequenceId third = s.submit(std::move(cut));
  std::map<SequenceId, Generation> done;
  for (auto& f : s.step()) done[f.id] = std::move(f.generation);  // the third, cut at its fifth token
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done.begin()->first, third);
  EXPECT_EQ(s.running(), 2u);
  for (auto& f : drain(s)) done[f.id] = std::move(f.generation);
  ASSERT_EQ(done.size(), 3u);
  const auto& a = done[first].token_versions;
  ASSERT_EQ(a.size(), 40u);
  EXPECT_EQ(std::count(a.begin(), a.end(), 3), 10);
  EXPECT_EQ(std::count(a.begin(), a.end(), 4), 30);
  EXPECT_EQ(done[second].tokens.size(), 40u);
  EXPECT_EQ(std::count(done[second].token_versions.begin(), done[second].token_versions.end(), 4), 40);
  EXPECT_TRUE(done[first].stopped && done[second].stopped);
  EXPECT_EQ(done[third].tokens.size(), 5u);
  EXPECT_TRUE(done[third].ended_by_caller && done[third].stopped);
  EXPECT_FALSE(done[third].reward.has_value());
}
