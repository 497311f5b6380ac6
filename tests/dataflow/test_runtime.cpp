// The distributed runtime end to end (tiny model, few versions): the accounting identities,
// versions, the staleness bound, bit-identical data-parallel trainers, the three HDF5 files,
// resume and the synchronous baseline. Runs at several world sizes (ctest): world − 3 trainer
// ranks, two rollout ranks, one dataflow rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/comm/role_comms.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/run/runtime.hpp"
#include "runtime_test_util.hpp"

namespace astraflow {
namespace {

Config tinyConfig(const std::string& dir, const std::string& extra_run = "", const std::string& extra = "",
                  const std::string& rollout = "{group_size: 4, max_new_tokens: 6, batch_tasks: 8}") {
  const int trainers = worldSize() - 3;
  const std::string yaml = R"(
run: {name: rt, output_dir: )" +
                           dir + R"(, seed: 5, threads_per_rank: 1, progress_every: 2)" + extra_run + R"(}
policies:
  - name: solver
    model: {d_model: 32, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 64, max_seq_len: 32}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: )" +
                           std::to_string(trainers) + R"(}
  - {role: rollout, policies: [solver], ranks: 2}
rollout: )" + rollout + R"(
trainer: {groups_per_step: 2, lr: 0.003}
eval: {problems: 8, every: 2}
)" + extra;
  return parseConfig(yaml, "test_runtime");
}

void expectBooksBalance(const json& s) {
  const std::int64_t produced = s["produced"], accepted = s["accepted"], filtered = s["filtered"],
                     stale = s["stale_dropped"], consumed = s["consumed"], buffered = s["buffered"];
  EXPECT_EQ(produced, accepted + filtered + stale);
  EXPECT_EQ(accepted, consumed + buffered);
}

TEST(Runtime, AsyncRunKeepsItsBooksAndTheStalenessBound) {
  const auto dir = sharedRunDir("async");
  const Config cfg = tinyConfig(dir, ", versions: 6, checkpoint_every: 3", "dataflow: {max_staleness: 1}\n");
  const json s = runJob(cfg);
  if (worldRank() != 0) return;
  EXPECT_EQ(s["versions"], 6);
  expectBooksBalance(s);
  // Cross-role: what the dataflow rank counted is what the other roles did.
  std::int64_t pushed = 0;
  for (const auto& r : ranksOf(s, "rollout")) pushed += num(r, "pushed");
  EXPECT_EQ(pushed, s["produced"].get<std::int64_t>());
  const auto trainers = ranksOf(s, "trainer");
  ASSERT_EQ(trainers.size(), static_cast<std::size_t>(worldSize() - 3));
  // Delta mode (the default): every rollout rank ends on the trainer's final weights, bit for
  // bit, and no delta was rejected. The two rollout ranks share one node's copy: the node moved
  // by deltas at least once, and pulled each version (0..6) at most once for both of them.
  std::int64_t deltas = 0, written = 0;
  for (const auto& r : ranksOf(s, "rollout")) {
    EXPECT_EQ(num(r, "final_version"), 6);
    EXPECT_EQ(r["weights_hash.solver"], trainers.front()["weights_hash"]);
    EXPECT_EQ(num(r, "weight_deltas_rejected"), 0);
    EXPECT_EQ(num(r, "node_ranks.solver"), 2);
    EXPECT_GE(num(r, "weight_pulls"), 1);
    deltas += num(r, "weight_deltas_applied");
    written += num(r, "node_versions_written.solver");
  }
  EXPECT_GT(deltas, 0);
  EXPECT_GE(written, 1);
  EXPECT_LE(written, 7);
  for (const auto& t : trainers) {
    EXPECT_EQ(num(t, "trajectories_trained"), s["consumed"].get<std::int64_t>() + s["replayed"].get<std::int64_t>());
    EXPECT_EQ(num(t, "final_version"), 6);
    EXPECT_EQ(num(t, "version_mismatches"), 0);
    EXPECT_EQ(num(t, "staleness_violations"), 0);
    EXPECT_LE(num(t, "max_staleness"), 1);
    // Data-parallel ranks hold bit-identical weights.
    EXPECT_EQ(t["weights_hash"], trainers.front()["weights_hash"]);
  }
  EXPECT_EQ(s["consumed"].get<std::int64_t>(), 6 * 2 * 4);
  // trajectories.h5 holds every produced trajectory.
  EXPECT_EQ(static_cast<std::int64_t>(io::readTrajectories(dir + "/trajectories.h5").size()),
            s["produced"].get<std::int64_t>());
  // trace.h5: versions strictly increase; consumed staleness within η.
  const auto events = io::readTraceEvents(dir + "/trace.h5");
  std::map<int, std::int64_t> last_step;
  std::int64_t last_publish = -1;
  int staleness_events = 0;
  for (const auto& e : events) {
    if (e.kind == "train_step") {
      auto [it, fresh] = last_step.emplace(e.rank, e.version);
      if (!fresh) {
        EXPECT_EQ(e.version, it->second + 1) << "rank " << e.rank;
        it->second = e.version;
      }
    } else if (e.kind == "publish") {
      EXPECT_GT(e.version, last_publish);
      last_publish = e.version;
    } else if (e.kind == "batch_staleness") {
      ++staleness_events;
      EXPECT_GE(e.staleness, 0);
      EXPECT_LE(e.staleness, 1);
    }
  }
  EXPECT_EQ(last_publish, 6);
  EXPECT_GT(staleness_events, 0);
  for (const auto& [rank, v] : last_step) EXPECT_EQ(v, 6) << "rank " << rank;
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_3.h5"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_6.solver.h5"));
  EXPECT_TRUE(fs::exists(dir + "/summary.json"));
  fs::remove_all(dir);
}

// With two trainer ranks (5 ranks; one at 4) the first segment shards AdamW's state (ZeRO-1,
// trainer.sharding: optimizer): the checkpoint gathers it. The resumed segment shards the
// weights too (sharding: parameters): the group takes its shards of the same checkpoint, its
// rank 0 publishes from them and the rollouts end on its weights.
TEST(Runtime, ResumeContinuesTheVersionAndKeepsEveryAcceptedTrajectory) {
  const auto dir = sharedRunDir("resume");
  Config cfg = tinyConfig(dir, ", versions: 4, checkpoint_every: 2, keep_best: true");
  cfg.trainer.sharding = TrainerSection::Sharding::Optimizer;
  const json first = runJob(cfg);
  Config more = tinyConfig(dir, ", versions: 7, checkpoint_every: 2, keep_best: true, keep_checkpoints: 1");
  more.trainer.sharding = TrainerSection::Sharding::Parameters;
  const json second = runJob(more, dir);
  if (worldRank() != 0) return;
  EXPECT_EQ(second["resumed_from"], 4);
  EXPECT_EQ(second["versions"], 7);
  expectBooksBalance(first);
  expectBooksBalance(second);  // counters and the held trajectories came through the checkpoint
  EXPECT_GE(second["produced"].get<std::int64_t>(), first["produced"].get<std::int64_t>());
  EXPECT_EQ(first["consumed"].get<std::int64_t>(), 4 * 8);
  EXPECT_EQ(second["consumed"].get<std::int64_t>(), 7 * 8);
  const auto trainers = ranksOf(second, "trainer");
  for (const auto& t : trainers) {
    EXPECT_EQ(num(t, "steps"), 3);
    EXPECT_EQ(num(t, "final_version"), 7);
    EXPECT_EQ(num(t, "version_mismatches"), 0);
  }
  // Sharded weights (two trainers): the group's rank 0 alone holds the published blob (the
  // other reports 0). One trainer alone shards nothing.
  EXPECT_NE(trainers[0]["weights_hash"], 0);
  for (std::size_t t = 1; t < trainers.size(); ++t) EXPECT_EQ(trainers[t]["weights_hash"], 0);
  for (const auto& r : ranksOf(second, "rollout"))
    EXPECT_EQ(r["weights_hash.solver"], trainers.front()["weights_hash"]);
  // Each trainer holds its shard of the state: equal halves with two (each unit is padded to
  // even); the 1/N size itself is test_data_parallel's checks.
  EXPECT_GT(num(trainers.front(), "optimizer_state_bytes"), 0);
  for (const auto& t : trainers)
    EXPECT_EQ(num(t, "optimizer_state_bytes"), num(trainers.front(), "optimizer_state_bytes"));
  // The resumed segment appended to trajectories.h5; its clock continued.
  EXPECT_EQ(static_cast<std::int64_t>(io::readTrajectories(dir + "/trajectories.h5").size()),
            second["produced"].get<std::int64_t>());
  // The clock continued from the checkpoint's time: the resumed run's wall includes an earlier
  // segment, at most the first run's whole wall (the checkpoint came before its end).
  const double earlier = second["wall_seconds"].get<double>() - second["segment_wall_seconds"].get<double>();
  EXPECT_GT(earlier, 0.0);
  EXPECT_LE(earlier, first["wall_seconds"].get<double>() + 1e-6);
  EXPECT_DOUBLE_EQ(second["eval_accuracy_start"].get<double>(), first["eval_accuracy_start"].get<double>());
  // eval.h5 holds both segments' rounds; the best round so far came through the checkpoint (a
  // tie keeps the earlier version), and best.json names what the last segment kept.
  EXPECT_EQ(static_cast<std::int64_t>(io::H5File::openReadOnly(dir + "/eval.h5").openDataset("rounds/round").rows()),
            first["eval_rounds"].get<std::int64_t>() + second["eval_rounds"].get<std::int64_t>());
  ASSERT_TRUE(first["eval_best_version"].is_number() && second["eval_best_version"].is_number());
  EXPECT_GE(second["eval_best_mean"].get<double>(), first["eval_best_mean"].get<double>());
  if (second["eval_best_mean"] == first["eval_best_mean"])
    EXPECT_EQ(second["eval_best_version"], first["eval_best_version"]);
  std::ifstream best_file(dir + "/checkpoints/best.json");
  EXPECT_EQ(json::parse(best_file)["version"], second["eval_best_version"]);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/best.solver.h5"));
  // run.keep_checkpoints: 1 in the second segment: of versions 2, 4 (the first's), 6 and 7, the
  // newest and the best evaluated one stay.
  const auto best = second["eval_best_version"].get<std::int64_t>();
  std::vector<std::int64_t> kept{7};
  if (best != 7) kept.push_back(best);
  EXPECT_EQ(completeCheckpoints(dir, {"solver"}), kept);
  EXPECT_EQ(second["checkpoints_pruned"].get<std::int64_t>(), best != 7 ? 2 : 3);
  EXPECT_EQ(first.value("checkpoints_pruned", -1), -1);  // the key only where the run prunes
  fs::remove_all(dir);
}

TEST(Runtime, SyncModeTrainsOnlyOnDataFromTheCurrentVersion) {
  const auto dir = sharedRunDir("sync");
  // Full-version weight transfer here (delta mode is the async test's), with each rollout rank a
  // pretend node of its own, so that full versions are relayed from node to node (a chain).
  ::setenv("ASTRAFLOW_NODE_RANKS", "1", 1);
  const json s = runJob(tinyConfig(dir, ", versions: 3, mode: sync", "weights: {mode: full, relay_fanout: 1}\n"));
  ::unsetenv("ASTRAFLOW_NODE_RANKS");
  if (worldRank() != 0) return;
  EXPECT_EQ(s["versions"], 3);
  EXPECT_EQ(s["mode"], "sync");
  expectBooksBalance(s);
  const auto trainers = ranksOf(s, "trainer");
  for (const auto& t : trainers) {
    EXPECT_EQ(num(t, "max_staleness"), 0);
    EXPECT_EQ(num(t, "final_version"), 3);
  }
  std::int64_t full = 0, relayed = 0;
  for (const auto& r : ranksOf(s, "rollout")) {
    EXPECT_EQ(r["weights_hash.solver"], trainers.front()["weights_hash"]);
    EXPECT_EQ(num(r, "weight_deltas_applied"), 0);
    EXPECT_EQ(num(r, "node_ranks.solver"), 1);
    full += num(r, "weight_full_pulls");
    relayed += num(r, "node_versions_relayed.solver");
  }
  EXPECT_GT(full, 0);  // the first node takes every version from the store
  // Which node's version came by relay depends on who asked first; the summary adds them up.
  const auto& books = s["weights"]["policies"]["solver"];
  EXPECT_EQ(books["rollout_full_pulls"].get<std::int64_t>(), full);
  EXPECT_EQ(books["rollout_relayed_pulls"].get<std::int64_t>(), relayed);
  fs::remove_all(dir);
}

// rollout.on_new_version. continue (async mode's default): versions arrive while sequences run
// and the sequences go on under them, so a trajectory's tokens come from several versions, each
// token saying which, and its range (what staleness is judged by) is its tokens'. finish: every
// sequence ends under the version it began with.
TEST(Runtime, RunningSequencesMoveToEachNewVersionAndTheirTokensSayWhich) {
  for (const std::string mode : {"continue", "finish"}) {
    const auto dir = sharedRunDir("on_new_version_" + mode);
    // Enough versions that one lands mid-sequence however the ranks are scheduled (6 once saw
    // none on a loaded machine, 12 once in twenty runs; the model's 32-position context caps the
    // sequences' length).
    Config cfg = tinyConfig(dir, ", versions: 24", "",
                            "{group_size: 4, max_new_tokens: 20, batch_tasks: 8, on_new_version: " + mode + "}");
    // No evaluation: no version is published while a round is out, which would leave fewer
    // versions to land mid-sequence.
    cfg.eval.problems = 0;
    const json s = runJob(cfg);
    if (worldRank() != 0) continue;
    SCOPED_TRACE(mode);
    expectBooksBalance(s);
    std::int64_t moved = 0, reported_spanning = 0;
    for (const auto& r : ranksOf(s, "rollout")) {
      moved += num(r, "engine_moved_sequences");
      reported_spanning += num(r, "spanning_versions");
    }
    for (const auto& t : ranksOf(s, "trainer")) EXPECT_EQ(num(t, "staleness_violations"), 0);
    const auto trajectories = io::readTrajectories(dir + "/trajectories.h5");
    ASSERT_FALSE(trajectories.empty());
    std::size_t spanning = 0;
    for (const auto& t : trajectories) {
      const auto versions = tokenVersions(t);
      std::int64_t last = -1, first = -1;
      for (std::size_t i = 0; i < versions.size(); ++i) {
        if (!t.policy_mask[i]) {
          EXPECT_EQ(versions[i], kContextVersion);
          continue;
        }
        EXPECT_GE(versions[i], last) << "task " << t.task_id << ": a token older than the one before it";
        if (first < 0) first = versions[i];
        last = versions[i];
      }
      if (first < 0) continue;
      EXPECT_EQ(t.weight_version_min, first);
      EXPECT_EQ(t.weight_version_max, last);
      spanning += first != last;
    }
    // Those of trajectories.h5 are training ones; a moved sequence may be an evaluation episode's.
    EXPECT_LE(static_cast<std::int64_t>(spanning), reported_spanning);
    if (mode == "continue") {
      EXPECT_GT(moved, 0) << "no version arrived while a sequence ran";
      EXPECT_GT(reported_spanning, 0) << "sequences moved, yet no trajectory spans two versions";
    } else {
      EXPECT_EQ(moved, 0);
      EXPECT_EQ(reported_spanning, 0);
    }
    fs::remove_all(dir);
  }
}

// A filter defined only here: the dataflow layer runs it from the config by name, with no core
// file changed.
class DropOddGroups : public Filter {
 public:
  std::string name() const override { return "drop_odd_groups"; }
  bool keep(const ReadyGroup& g) override { return g.group_id() % 2 == 0; }
};

TEST(Runtime, AFilterDefinedInTheTestRunsThroughTheDataflowLayer) {
  registerFilter("drop_odd_groups", [](const PluginSpec& spec) -> std::unique_ptr<Filter> {
    spec.allowOnly({});
    return std::make_unique<DropOddGroups>();
  });
  const auto dir = sharedRunDir("plugin");
  const json s = runJob(tinyConfig(dir, ", versions: 3", "dataflow: {filters: [drop_odd_groups]}\n"));
  if (worldRank() != 0) return;
  expectBooksBalance(s);
  const auto& counters = s["plugins"]["filter.0.drop_odd_groups@solver"];
  const std::int64_t dropped = counters["dropped"], kept = counters["kept"];
  EXPECT_GT(dropped, 0);
  EXPECT_GT(kept, 0);
  EXPECT_EQ(s["filtered"].get<std::int64_t>(), dropped * 4);  // group_size 4
  EXPECT_EQ(s["consumed"].get<std::int64_t>(), 3 * 8);
  EXPECT_EQ(s["rollouts_generated"], s["produced"]);
  fs::remove_all(dir);
}

TEST(Runtime, PluginStateAndCountersComeBackOnResume) {
  const auto dir = sharedRunDir("plugin_resume");
  const std::string plugins =
      // keep_all, not zero_advantage: the tiny untrained policy scores 0 almost always, so
      // dynamic sampling would wait for rare lucky groups (and the test for minutes).
      "dataflow: {prompt_pool: 12, curators: [greso], filters: [keep_all], "
      "sampler: {kind: replay, ratio: 0.5, size: 64, max_staleness: 8}}\n";
  const json first = runJob(tinyConfig(dir, ", versions: 3", plugins));
  const json second = runJob(tinyConfig(dir, ", versions: 5", plugins), dir);
  if (worldRank() != 0) return;
  expectBooksBalance(first);
  expectBooksBalance(second);
  EXPECT_EQ(second["resumed_from"], 3);
  for (const char* key : {"curator.0.greso", "filter.0.keep_all@solver", "sampler.replay@solver"}) {
    ASSERT_TRUE(first["plugins"].contains(key)) << key;
    for (const auto& [counter, value] : first["plugins"][key].items()) {
      // Counters carry over: never below what the first segment ended with.
      EXPECT_GE(second["plugins"][key][counter].get<std::int64_t>(), value.get<std::int64_t>())
          << key << "." << counter;
    }
  }
  // (A reset would show: the resumed segment needs few new prompts, the buffer carried over.)
  EXPECT_GT(first["plugins"]["curator.0.greso"]["admitted"].get<std::int64_t>(), 0);
  for (const auto& t : ranksOf(second, "trainer")) {
    EXPECT_EQ(num(t, "staleness_violations"), 0);
    EXPECT_EQ(num(t, "final_version"), 5);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace astraflow
