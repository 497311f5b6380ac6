// A job with simulated rollout pools and a simulated trainer (docs/simulation.md), end to end at
// several world sizes: the real rings, dataflow loop and weight store carry synthetic
// trajectories and weight versions. The books balance, every rollout rank ends on the trainer's
// last synthetic version (by checksum), the generated lengths follow the configured lognormal
// (their median), the reward follows the success rate as it rises with the version, and the
// rollout ranks work per episode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "astraflow/io/trajectory_writer.hpp"
#include "runtime_test_util.hpp"

namespace astraflow {
namespace {

Config simulatedConfig(const std::string& dir, const std::string& batching = "continuous", bool shared_prefix = true) {
  const int rollouts = worldSize() - 2;
  const std::string yaml = R"(
run: {name: sim, output_dir: )" +
                           dir + R"(, seed: 3, threads_per_rank: 1, versions: 16}
policies:
  - name: solver
    # Wide enough that attention is cheap per pair (trainer/micro_batches.hpp's attentionPairCost),
    # so the trainer shares each group's prompt; the simulated pools never run it.
    model: {d_model: 256, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 1024, max_seq_len: 96}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - role: rollout
    policies: [solver]
    ranks: )" + std::to_string(rollouts) +
                           R"(
    backend:
      kind: simulated
      lengths: {kind: lognormal, median: 12, sigma: 0.5, min: 2, max: 40}
      decode_tokens_per_second: 4000
      batch_limit: 8
      batching: )" + batching +
                           R"(
      success_rate: 0.1
      success_gain_per_version: 0.06
      success_max: 0.95
rollout: {group_size: 4, max_new_tokens: 48, batch_tasks: 8}
trainer:
  groups_per_step: 4
  shared_prefix: )" + std::string(shared_prefix ? "true" : "false") +
                           R"(
  simulate: {fixed_seconds: 0.02, seconds_per_token: 0.00001, weight_bytes: 262144, changed_fraction: 0.01}
eval: {problems: 0}
)";
  return parseConfig(yaml, "test_simulation");
}

TEST(Simulation, SyntheticWorkloadFlowsThroughTheRealRuntime) {
  const auto dir = sharedRunDir("simulation");
  const json s = runJob(simulatedConfig(dir));
  if (worldRank() != 0) return;
  EXPECT_EQ(s["versions"], 16);
  const std::int64_t produced = s["produced"], accepted = s["accepted"], filtered = s["filtered"],
                     stale = s["stale_dropped"], consumed = s["consumed"], buffered = s["buffered"];
  EXPECT_EQ(produced, accepted + filtered + stale);
  EXPECT_EQ(accepted, consumed + buffered);
  EXPECT_EQ(consumed, 16 * 16);
  const auto trainers = ranksOf(s, "trainer");
  ASSERT_EQ(trainers.size(), 1u);
  EXPECT_EQ(num(trainers[0], "steps"), 16);
  // The step is costed on the tokens its forward passes would hold: one micro-batch a step, each
  // group's prompt once (trainer.shared_prefix), so fewer than the sequences' own tokens, and the
  // trainer slept at least that long.
  EXPECT_EQ(num(trainers[0], "micro_batches"), 16);
  EXPECT_LT(num(trainers[0], "forward_tokens"), num(trainers[0], "sequence_tokens"));
  EXPECT_GE(trainers[0]["step_seconds"].get<double>(), 16 * 0.02 + 0.00001 * num(trainers[0], "forward_tokens"));
  std::int64_t pushed = 0;
  for (const auto& r : ranksOf(s, "rollout")) {
    pushed += num(r, "pushed");
    EXPECT_EQ(r["weights_hash.solver"], trainers[0]["weights_hash"]);  // the synthetic bytes came through
  }
  EXPECT_EQ(pushed, produced);
  // Every rank's own CPU time is reported (the ceiling and async-vs-sync experiments read it
  // against the wall time): the start-up's more than nothing, the whole at least that, and less
  // than all the cores for the whole run.
  const auto dataflow = ranksOf(s, "dataflow");
  ASSERT_EQ(dataflow.size(), 1u);
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double wall = dataflow[0]["wall_seconds"].get<double>();
  for (const auto& role : {"dataflow", "trainer", "rollout"}) {
    for (const auto& r : ranksOf(s, role)) {
      EXPECT_GT(r["startup_cpu_seconds"].get<double>(), 0.0) << role;
      EXPECT_GE(r["cpu_seconds"].get<double>(), r["startup_cpu_seconds"].get<double>()) << role;
      EXPECT_LT(r["cpu_seconds"].get<double>(), wall * cores) << role;
    }
  }

  const auto trajectories = io::readTrajectories(dir + "/trajectories.h5");
  ASSERT_EQ(static_cast<std::int64_t>(trajectories.size()), produced);
  std::vector<int> lengths;
  double early = 0, late = 0;
  int early_n = 0, late_n = 0;
  for (const auto& t : trajectories) {
    int generated = 0;
    for (const auto m : t.policy_mask) generated += m;
    lengths.push_back(generated);
    if (t.weight_version_min <= 3) {
      early += t.rewards[0];
      ++early_n;
    } else if (t.weight_version_min >= 8) {
      late += t.rewards[0];
      ++late_n;
    }
  }
  // The ranks work per episode (batching continuous): a trajectory starts when its task is
  // taken, not with a call's batch, so hardly any two of one rank share a start (a batch of 8
  // would share it 8 ways).
  std::set<std::pair<std::uint32_t, double>> starts;
  for (const auto& t : trajectories) starts.emplace(t.producer_rank, t.t_started);
  EXPECT_GT(starts.size(), trajectories.size() * 9 / 10);
  std::sort(lengths.begin(), lengths.end());
  EXPECT_NEAR(lengths[lengths.size() / 2], 12, 2) << "the median generated length";
  EXPECT_GE(lengths.front(), 2);
  EXPECT_LE(lengths.back(), 40);
  // P(success) is at most 0.28 at versions 0–3 and at least 0.58 from version 8. Each observed
  // rate must be within three binomial standard deviations of its side of that gap (how many
  // trajectories fall on each side depends on how far the pool lags the trainer). A success
  // rate that ignored the version (0.1 throughout) fails the second check.
  ASSERT_GT(early_n, 10);
  ASSERT_GT(late_n, 10);
  const auto spread = [](double p, int n) { return 3.0 * std::sqrt(p * (1 - p) / n); };
  EXPECT_LT(early / early_n, 0.28 + spread(0.28, early_n)) << early_n << " early trajectories";
  EXPECT_GT(late / late_n, 0.58 - spread(0.58, late_n)) << late_n << " late trajectories";
  fs::remove_all(dir);
}

// Static batching keeps the call loop: a rank takes batch_tasks tasks, and every trajectory of a
// call starts with it.
TEST(Simulation, StaticBatchingRanksTakeTheirTasksByTheCall) {
  const auto dir = sharedRunDir("simulation_static");
  const json s = runJob(simulatedConfig(dir, "static", false));
  if (worldRank() != 0) return;
  EXPECT_EQ(s["versions"], 16);
  // Without trainer.shared_prefix a step is costed padded: more than the sequences' own tokens.
  const auto trainers = ranksOf(s, "trainer");
  ASSERT_EQ(trainers.size(), 1u);
  EXPECT_GT(num(trainers[0], "forward_tokens"), num(trainers[0], "sequence_tokens"));
  EXPECT_EQ(s["produced"].get<std::int64_t>(), s["accepted"].get<std::int64_t>() + s["filtered"].get<std::int64_t>() +
                                                   s["stale_dropped"].get<std::int64_t>());
  const auto trajectories = io::readTrajectories(dir + "/trajectories.h5");
  std::set<std::pair<std::uint32_t, double>> starts;
  for (const auto& t : trajectories) starts.emplace(t.producer_rank, t.t_started);
  EXPECT_LE(starts.size(), trajectories.size() / 2) << "calls of up to 8 tasks";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace astraflow
