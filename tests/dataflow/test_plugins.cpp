// Data-algorithm plug-ins: exact decisions of zero_advantage, replay and GRESO, config errors,
// and that a failing plug-in costs no data.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "astraflow/core/config.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/dataflow/plugins.hpp"

namespace astraflow {
namespace {

Trajectory pluginMember(std::uint64_t group, std::uint32_t index, std::int64_t version, double reward) {
  Trajectory t;
  t.task_id = group * 100 + index;
  t.problem_id = group;
  t.group_id = group;
  t.group_index = index;
  t.policy = "solver";
  t.weight_version_min = t.weight_version_max = version;
  t.tokens = {1, 5};
  t.behav_logprobs = {0.f, -0.5f};
  t.policy_mask = {0, 1};
  t.rewards = {reward};
  return t;
}

PluginSpec spec(const std::string& kind, std::map<std::string, std::string> params = {}) {
  return PluginSpec{kind, std::move(params), "test." + kind};
}

std::vector<std::unique_ptr<Filter>> filters(const std::string& kind) {
  std::vector<std::unique_ptr<Filter>> out;
  out.push_back(makeFilter(spec(kind)));
  return out;
}

TEST(ZeroAdvantage, DropsExactlyTheGroupsWhoseRewardsAllEqual) {
  BatchAssembler a("solver", 3, 1, 4, filters("zero_advantage"));
  const std::vector<std::vector<double>> groups = {{1, 1, 1}, {0, 1, 0}, {0, 0, 0}, {0.5, 0.5, 0.25}, {0, 0, 0}};
  for (std::uint64_t g = 0; g < groups.size(); ++g) {
    for (std::uint32_t i = 0; i < 3; ++i) a.ingest(pluginMember(g, i, 0, groups[g][i]));
  }
  std::set<std::uint64_t> served;
  while (auto batch = a.serve(0, 0)) served.insert(batch->trajectories.front().group_id);
  EXPECT_EQ(served, (std::set<std::uint64_t>{1, 3}));
  const auto& c = a.filters().front()->counters();
  EXPECT_EQ(c.dropped, 3u);
  EXPECT_EQ(c.kept, 2u);
  EXPECT_EQ(a.counters().filtered, 9u);
  EXPECT_EQ(a.counters().accepted(), a.counters().consumed + a.buffered());
}

TEST(Replay, ServesTheRatioWithinBinomialToleranceAndHonoursSizeAndStaleness) {
  const double ratio = 0.3;
  const int group_size = 2, per_batch = 10, batches = 400;
  const std::uint64_t size = 40;  // trajectories: the pool holds the last 20 groups
  BatchAssembler a("solver", group_size, per_batch, 1000, {},
                   makeSampler(spec("replay", {{"ratio", "0.3"}, {"size", "40"}, {"max_staleness", "3"}})), 42);
  std::uint64_t next_group = 0;
  std::vector<std::uint64_t> fresh_order;  // group ids in the order they were first served
  std::uint64_t slots = 0, replayed_slots = 0;
  for (int v = 0; v < batches; ++v) {
    while (a.readyGroups() < static_cast<std::size_t>(per_batch)) {
      for (int i = 0; i < group_size; ++i) a.ingest(pluginMember(next_group, static_cast<std::uint32_t>(i), v, i));
      ++next_group;
    }
    auto batch = a.serve(v, static_cast<std::uint64_t>(v));
    ASSERT_TRUE(batch);
    ASSERT_EQ(batch->trajectories.size(), static_cast<std::size_t>(per_batch * group_size));
    std::set<std::uint64_t> fresh_now;
    for (std::size_t k = 0; k < batch->trajectories.size(); k += group_size) {
      const auto& t = batch->trajectories[k];
      ++slots;
      const bool seen = std::find(fresh_order.begin(), fresh_order.end(), t.group_id) != fresh_order.end();
      if (seen) {
        ++replayed_slots;
        // Size: only the last size/group_size groups served can come back.
        const auto pos = std::find(fresh_order.begin(), fresh_order.end(), t.group_id) - fresh_order.begin();
        EXPECT_GE(pos,
                  static_cast<std::ptrdiff_t>(fresh_order.size()) - static_cast<std::ptrdiff_t>(size / group_size));
        // Staleness: never older than max_staleness.
        EXPECT_LE(v - t.weight_version_min, 3);
      } else {
        fresh_now.insert(t.group_id);
      }
    }
    for (auto id : fresh_now) fresh_order.push_back(id);
  }
  // Binomial: mean n·r, σ = sqrt(n·r·(1−r)); allow 4σ. (The first batch has an empty pool.)
  const double n = static_cast<double>(slots - per_batch);
  const double sigma = std::sqrt(n * ratio * (1 - ratio));
  EXPECT_NEAR(static_cast<double>(replayed_slots), n * ratio, 4 * sigma);
  EXPECT_EQ(a.counters().replayed, replayed_slots * group_size);
  EXPECT_EQ(a.counters().consumed + a.counters().replayed, slots * group_size);
}

TEST(Replay, AdmissionScalesByTheFreshShareSoDataDoesNotAgePastTheBound) {
  // Producers fill exactly the admission room each version (data made with that version's
  // weights, arriving at once); η = 2, B = 8 groups of 1, replay ratio 0.5. Without the fresh
  // share in the rule, the buffer grows faster than batches drain it and data goes stale.
  const int eta = 2;
  BatchAssembler a("solver", 1, 8, eta, {}, makeSampler(spec("replay", {{"ratio", "0.5"}, {"max_staleness", "50"}})),
                   9);
  std::uint64_t next = 0;
  for (int v = 0; v < 300; ++v) {
    for (std::int64_t room = a.admissionRoom(v, 0); room > 0; --room) a.ingest(pluginMember(next++, 0, v, 1));
    a.serve(v, static_cast<std::uint64_t>(v));
  }
  EXPECT_GT(a.counters().replayed, 0u);
  EXPECT_GT(a.counters().batches, 250u);
  EXPECT_LE(a.counters().stale_dropped, a.counters().produced / 50) << "produced " << a.counters().produced;
}

// The trainer checks staleness against the bound the batch carries, so the assembler must stamp
// the same bound servedStalenessBound derives from the config: max(η, the sampler's own).
TEST(Replay, BatchesCarryTheBoundTheyWereServedUnder) {
  const auto cfg = parseConfig(
      "policies: [{name: solver}]\nlayout: [{role: dataflow}, {role: trainer, policy: solver}, "
      "{role: rollout, policies: [solver]}]\ndataflow: {max_staleness: 3, sampler: {kind: "
      "replay, ratio: 0.5, max_staleness: 11}}\n",
      "bound.yaml");
  BatchAssembler replay("solver", 1, 1, cfg.dataflow.max_staleness, {}, makeSampler(cfg.dataflow.sampler), 1);
  replay.ingest(pluginMember(0, 0, 0, 1));
  const auto b = replay.serve(0, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->max_staleness, servedStalenessBound(cfg));
  EXPECT_EQ(b->max_staleness, 11);

  BatchAssembler fresh("solver", 1, 1, 3, {}, makeSampler(spec("fresh")), 1);
  fresh.ingest(pluginMember(0, 0, 0, 1));
  const auto f = fresh.serve(0, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->max_staleness, 3);
}

TEST(Replay, RatioZeroIsPlainFreshSampling) {
  BatchAssembler a("solver", 1, 2, 10, {}, makeSampler(spec("replay", {{"ratio", "0"}})), 1);
  for (std::uint64_t g = 0; g < 6; ++g) a.ingest(pluginMember(g, 0, 0, 1));
  for (int v = 0; v < 3; ++v) {
    auto b = a.serve(0, 0);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->trajectories[0].group_id, static_cast<std::uint64_t>(2 * v));
  }
  EXPECT_EQ(a.counters().replayed, 0u);
}

TEST(Greso, ProbabilitiesFollowTheHandComputedTrajectory) {
  auto greso = makeCurator(spec("greso", {{"update_every", "2"}}));
  auto p = [&] {
    const auto j = nlohmann::json::parse(greso->saveState());
    return std::make_pair(j["p_easy"].get<double>(), j["p_hard"].get<double>());
  };
  EXPECT_EQ(p(), std::make_pair(0.5, 0.5));
  greso->observe(PromptInfo{1, 0, {}}, {1, 1});  // easy, zero variance (z = 1)
  greso->observe(PromptInfo{2, 0, {}}, {0, 1});  // easy (mean 0.5), varied → window: easy 1/2 zero-variance > 0.083
  EXPECT_NEAR(p().first, 0.49, 1e-12);
  EXPECT_NEAR(p().second, 0.50, 1e-12);                // no hard group in the window: unchanged
  greso->observe(PromptInfo{3, 0, {}}, {0, 0});        // hard, zero variance (z = 1)
  greso->observe(PromptInfo{4, 0, {}}, {0, 1, 0, 0});  // hard, varied → hard 1/2 > 0.167
  EXPECT_NEAR(p().first, 0.49, 1e-12);
  EXPECT_NEAR(p().second, 0.49, 1e-12);
  greso->observe(PromptInfo{5, 0, {}}, {1, 0});
  greso->observe(PromptInfo{6, 0, {}}, {0, 1});  // easy 0/2 ≤ 0.083 → up
  EXPECT_NEAR(p().first, 0.50, 1e-12);
  EXPECT_NEAR(p().second, 0.49, 1e-12);

  // Submit probabilities: unseen or z = 0 → 1; prompt 1 (easy, z = 1) → max(0.5, 0.05);
  // prompt 3 (hard, z = 1) → max(0.49, 0.30).
  std::mt19937_64 rng(7);
  const int draws = 20000;
  auto rate = [&](std::uint64_t problem) {
    int admitted = 0;
    for (int i = 0; i < draws; ++i) admitted += greso->admit(PromptInfo{problem, 0, {}}, rng) ? 1 : 0;
    return admitted / static_cast<double>(draws);
  };
  EXPECT_EQ(rate(2), 1.0);
  EXPECT_EQ(rate(99), 1.0);
  const double tol = 4 * std::sqrt(0.25 / draws);
  EXPECT_NEAR(rate(1), 0.5, tol);
  EXPECT_NEAR(rate(3), 0.49, tol);
}

TEST(Greso, FloorsBoundTheSkipping) {
  auto greso = makeCurator(spec("greso", {{"update_every", "1000000"}}));
  for (int i = 0; i < 10; ++i) greso->observe(PromptInfo{1, 0, {}}, {1, 1});  // easy, z = 10: 0.5^10 < floor 0.05
  for (int i = 0; i < 10; ++i) greso->observe(PromptInfo{2, 0, {}}, {0, 0});  // hard, z = 10: floor 0.30
  std::mt19937_64 rng(3);
  int easy = 0, hard = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    easy += greso->admit(PromptInfo{1, 0, {}}, rng) ? 1 : 0;
    hard += greso->admit(PromptInfo{2, 0, {}}, rng) ? 1 : 0;
  }
  EXPECT_NEAR(easy / double(draws), 0.05, 4 * std::sqrt(0.05 * 0.95 / draws));
  EXPECT_NEAR(hard / double(draws), 0.30, 4 * std::sqrt(0.3 * 0.7 / draws));
  // State survives a checkpoint round trip.
  auto copy = makeCurator(spec("greso"));
  copy->loadState(greso->saveState());
  EXPECT_EQ(copy->saveState(), greso->saveState());
}

PromptInfo atDifficulty(std::uint64_t problem, int difficulty) {
  return PromptInfo{problem, 0, {{"difficulty", std::to_string(difficulty)}}};
}

TEST(Curriculum, OpensTheNextLevelOnceRecentAccuracyPassesTheThreshold) {
  auto c = makeCurator(spec("curriculum", {{"start", "1"}, {"threshold", "0.75"}, {"window", "2"}}));
  std::mt19937_64 rng(1);
  EXPECT_TRUE(c->admit(atDifficulty(1, 1), rng));
  EXPECT_FALSE(c->admit(atDifficulty(2, 2), rng));
  EXPECT_TRUE(c->admit(PromptInfo{3, 0, {}}, rng));  // no difficulty: always admitted
  c->observe(atDifficulty(1, 1), {1, 1});
  c->observe(atDifficulty(2, 2), {1, 1});  // not the current level: ignored
  EXPECT_FALSE(c->admit(atDifficulty(2, 2), rng));
  c->observe(atDifficulty(4, 1), {0, 1});  // window [1.0, 0.5]: mean 0.75 ≥ 0.75 → level 2
  EXPECT_TRUE(c->admit(atDifficulty(2, 2), rng));
  EXPECT_FALSE(c->admit(atDifficulty(5, 3), rng));
  EXPECT_EQ(c->counters().skipped, 3u);
  auto copy = makeCurator(spec("curriculum"));
  copy->loadState(c->saveState());
  EXPECT_TRUE(copy->admit(atDifficulty(2, 2), rng));
}

class ThrowingFilter : public Filter {
 public:
  std::string name() const override { return "throwing"; }
  bool keep(const ReadyGroup&) override { throw std::runtime_error("broken plug-in"); }
};

TEST(Plugins, AFilterThatThrowsKeepsTheDataAndIsCounted) {
  std::vector<std::unique_ptr<Filter>> f;
  f.push_back(std::make_unique<ThrowingFilter>());
  BatchAssembler a("solver", 2, 1, 4, std::move(f));
  a.ingest(pluginMember(1, 0, 0, 0));
  a.ingest(pluginMember(1, 1, 0, 1));
  ASSERT_TRUE(a.serve(0, 0));
  EXPECT_EQ(a.filters().front()->counters().errors, 1u);
  EXPECT_EQ(a.counters().filtered, 0u);
}

void expectConfigError(const std::string& dataflow_yaml, const std::string& needle) {
  const std::string yaml =
      "policies: [{name: solver}]\nlayout: [{role: dataflow}, {role: trainer, policy: solver}, "
      "{role: rollout, policies: [solver]}]\ndataflow: " +
      dataflow_yaml + "\n";
  try {
    parseConfig(yaml, "plugins.yaml");
    ADD_FAILURE() << "accepted: " << dataflow_yaml;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Plugins, BadNamesAndParametersAreConfigErrorsNamingTheKey) {
  expectConfigError("{filters: [zero_advantag]}", "dataflow.filters[0]: unknown filter 'zero_advantag'; allowed:");
  expectConfigError("{sampler: {kind: replay, ratio: 1.5}}", "dataflow.sampler.ratio: given '1.5'");
  expectConfigError("{sampler: {kind: replay, size: -3}}", "dataflow.sampler.size: given '-3'");
  expectConfigError("{sampler: {kind: replay, ratoi: 0.3}}", "dataflow.sampler.ratoi: unknown parameter");
  expectConfigError("{curators: [{kind: greso, floor_easy: 2}]}", "dataflow.curators[0].floor_easy");
  expectConfigError("{router: by_rol}", "dataflow.router: unknown router 'by_rol'");
  const auto ok = parseConfig(
      "policies: [{name: solver}]\nlayout: [{role: dataflow}, {role: trainer, policy: "
      "solver}, {role: rollout, policies: [solver]}]\ndataflow: {curators: [greso], filters: "
      "[zero_advantage], sampler: {kind: replay, ratio: 0.3, size: 10000, max_staleness: 8}}\n",
      "ok.yaml");
  EXPECT_EQ(ok.dataflow.filters.at(0).kind, "zero_advantage");
  EXPECT_EQ(ok.dataflow.sampler.params.at("ratio"), "0.3");
  EXPECT_EQ(servedStalenessBound(ok), 8);
}

}  // namespace
}  // namespace astraflow
