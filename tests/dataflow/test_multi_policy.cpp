// Multi-policy collaborative training end to end (tiny models, few versions): a solver and a
// verifier with a trainer group and a weight stream each, on arithmetic and on text math. Runs at several world sizes
// (ctest): one dataflow rank, one trainer per policy, world − 3 rollout ranks serving both policies.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/run/hf_folders.hpp"
#include "runtime_test_util.hpp"

namespace astraflow {
namespace {

// The verifier's model is smaller, so its weight stream is told apart by size in the trace.
Config teamConfig(const std::string& dir, const std::string& extra_run = "") {
  const int rollouts = worldSize() - 3;
  const std::string yaml = R"(
run: {name: team, output_dir: )" +
                           dir + R"(, seed: 3, threads_per_rank: 1, progress_every: 2)" + extra_run + R"(}
policies:
  - name: solver
    model: {d_model: 32, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 64, max_seq_len: 48}
  - name: verifier
    model: {d_model: 16, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 32, max_seq_len: 48}
workflow:
  kind: solver_verifier
  roles: {solver: solver, verifier: verifier}
  max_rounds: 2
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver}
  - {role: trainer, policy: verifier}
  - {role: rollout, policies: [solver, verifier], ranks: )" +
                           std::to_string(rollouts) + R"(}
rollout: {group_size: 4, max_new_tokens: 4, batch_tasks: 8}
trainer: {groups_per_step: 2, lr: 0.003}
eval: {problems: 6, every: 2}
dataflow: {max_staleness: 1, trajectory_ring: {slots: 512, slot_bytes: 512}}
)";
  return parseConfig(yaml, "test_multi_policy");
}

void expectPolicyBooksBalance(const json& p, const std::string& name) {
  const std::int64_t produced = p["produced"], accepted = p["accepted"], filtered = p["filtered"],
                     stale = p["stale_dropped"], consumed = p["consumed"], buffered = p["buffered"];
  EXPECT_EQ(produced, accepted + filtered + stale) << name;
  EXPECT_EQ(accepted, consumed + buffered) << name;
}

TEST(MultiPolicy, EachTrainerGetsOnlyItsPolicyAndTheStreamsAdvanceOnTheirOwn) {
  const auto dir = sharedRunDir("team");
  const json s = runJob(teamConfig(dir, ", versions: 4"));
  if (worldRank() != 0) return;
  EXPECT_EQ(s["workflow"], "solver_verifier");
  ASSERT_TRUE(s["policies"].contains("solver"));
  ASSERT_TRUE(s["policies"].contains("verifier"));
  std::map<std::string, int> trainer_rank;
  for (const auto& name : {"solver", "verifier"}) {
    const json& p = s["policies"][name];
    expectPolicyBooksBalance(p, name);
    EXPECT_EQ(p["versions"], 4) << name;
    EXPECT_EQ(p["consumed"].get<std::int64_t>(), 4 * 2 * 4) << name;  // versions × groups × group size
    // Only its own policy's trajectories reached each trainer, exactly the ones served to it.
    EXPECT_EQ(p["foreign_trajectories"], 0) << name;
    EXPECT_EQ(p["trained"].get<std::int64_t>(), p["consumed"].get<std::int64_t>() + p["replayed"].get<std::int64_t>());
  }
  // One trajectory per role per team episode.
  EXPECT_EQ(s["policies"]["solver"]["produced"], s["policies"]["verifier"]["produced"]);
  for (const auto& r : s["ranks"]) {
    if (r["role"] == "trainer") trainer_rank[r["label"].get<std::string>().substr(8)] = r["rank"].get<int>();
  }
  ASSERT_EQ(trainer_rank.size(), 2u);
  // trajectories.h5: every row carries one of the two policies, in equal numbers.
  std::map<std::string, std::int64_t> rows;
  for (const auto& t : io::readTrajectories(dir + "/trajectories.h5")) rows[t.policy]++;
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows["solver"], rows["verifier"]);
  EXPECT_EQ(rows["solver"], s["policies"]["solver"]["produced"].get<std::int64_t>());
  // The trace: each policy's versions are published in strictly increasing order by its own
  // stream (publish events carry the trainer group in `policy`), each trainer steps 1..4 alone,
  // and every rollout rank pulled both streams (told apart by their sizes).
  std::map<std::int32_t, std::int64_t> last_publish;
  std::map<int, std::int64_t> last_step;
  std::map<int, std::map<std::int32_t, std::int64_t>> pulls;  // rank → policy stream → last version
  for (const auto& e : io::readTraceEvents(dir + "/trace.h5")) {
    if (e.kind == "publish") {
      ASSERT_GE(e.policy, 0);
      auto [it, fresh] = last_publish.emplace(e.policy, e.version);
      if (!fresh) {
        EXPECT_GT(e.version, it->second) << "stream " << e.policy;
        it->second = e.version;
      }
    } else if (e.kind == "train_step") {
      auto [it, fresh] = last_step.emplace(e.rank, e.version);
      if (!fresh) {
        EXPECT_EQ(e.version, it->second + 1) << "rank " << e.rank;
        it->second = e.version;
      }
    } else if (e.kind == "weight_pull") {
      auto [it, fresh] = pulls[e.rank].emplace(e.policy, e.version);
      if (!fresh) {
        EXPECT_GT(e.version, it->second) << "rank " << e.rank;
        it->second = e.version;
      }
    }
  }
  ASSERT_EQ(last_publish.size(), 2u);
  for (const auto& [stream, v] : last_publish) EXPECT_EQ(v, 4) << "stream " << stream;
  EXPECT_EQ(last_step[trainer_rank["solver"]], 4);
  EXPECT_EQ(last_step[trainer_rank["verifier"]], 4);
  EXPECT_EQ(pulls.size(), static_cast<std::size_t>(worldSize() - 3));
  for (const auto& [rank, streams] : pulls) EXPECT_EQ(streams.size(), 2u) << "rank " << rank;
  // Team accuracy and each role's own reward are reported for the start and the end.
  EXPECT_TRUE(s["team_accuracy_end"].is_number());
  EXPECT_TRUE(s["roles"]["verifier"]["eval_reward_end"].is_number());
  EXPECT_EQ(s["roles"]["verifier"]["reward"], "verdict_correct");
  fs::remove_all(dir);
}

TEST(MultiPolicy, SyncTeamTrainsBothPoliciesOnCurrentData) {
  const auto dir = sharedRunDir("team_sync");
  const json s = runJob(teamConfig(dir, ", versions: 2, mode: sync"));
  if (worldRank() != 0) return;
  for (const auto& name : {"solver", "verifier"}) {
    expectPolicyBooksBalance(s["policies"][name], name);
    EXPECT_EQ(s["policies"][name]["versions"], 2) << name;
  }
  for (const auto& t : ranksOf(s, "trainer")) {
    EXPECT_EQ(num(t, "max_staleness"), 0);
    EXPECT_EQ(num(t, "final_version"), 2);
  }
  fs::remove_all(dir);
}

// A team run resumes (docs/multi-policy.md). The run's final checkpoint is removed, as if it
// had been killed after v2: the v2 checkpoint was taken once both policies had published 2, with
// the faster one's later batches put back into its buffer. Resumed to v6, each policy has trained
// one batch per version (versions = 6), what this segment trained is what it consumed past the
// checkpoint's two full batches, and its books balance. A group still incomplete at v2 is served
// with the members that had arrived (docs/runtime-notes.md), so a batch may be short by the
// members that were in flight (each served group still has one member or more).
TEST(MultiPolicy, ATeamRunResumesWithEachPolicysBooksBalanced) {
  const auto dir = sharedRunDir("team_resume");
  runJob(teamConfig(dir, ", versions: 4, checkpoint_every: 2"));
  if (worldRank() == 0) {
    for (const auto& e : fs::directory_iterator(fs::path(dir) / "checkpoints"))
      if (e.path().filename().string().rfind("step_4.", 0) == 0) fs::remove(e.path());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const json s = runJob(teamConfig(dir, ", versions: 6, checkpoint_every: 2"), dir);
  if (worldRank() != 0) return;
  EXPECT_EQ(s["resumed_from"], 2);
  for (const auto& name : {"solver", "verifier"}) {
    const json& p = s["policies"][name];
    expectPolicyBooksBalance(p, name);
    EXPECT_EQ(p["versions"], 6) << name;
    // This segment's trainer trained versions 3..6 only: four batches of 2 groups × 4.
    const std::int64_t segment = p["trained"].get<std::int64_t>() - p["replayed"].get<std::int64_t>();
    EXPECT_EQ(p["consumed"].get<std::int64_t>(), 2 * 2 * 4 + segment) << name;
    EXPECT_LE(segment, 4 * 2 * 4) << name;
    EXPECT_GE(segment, 4 * 2) << name;
  }
  fs::remove_all(dir);
}

// The paper's math team on text (docs/multi-policy.md, "On text"): Hugging Face policies, a JSONL
// math dataset scored by the `math` reward, chat transcripts with the paper's prompts. Every team
// episode yields one trajectory per role to its own trainer, every trajectory's reward has a
// reason, and the books of both policies balance, at every world size ctest runs.
TEST(MultiPolicy, TheMathTeamRunsOnTextProblems) {
  const auto dir = sharedRunDir("team_text");
  if (worldRank() == 0) {
    fs::create_directories(dir);
    InitModelOptions init;
    init.model = modelPreset("tiny-qwen3");
    initModel(dir + "/model", init);
    std::ofstream rows(dir + "/math.jsonl");
    for (int a = 2; a < 14; ++a)
      rows << json{{"prompt", "What is " + std::to_string(a) + " plus " + std::to_string(a + 3) +
                                  "?\nLet's think step by step and output the final answer within \\boxed{}."},
                   {"answer", std::to_string(2 * a + 3)}}
                  .dump()
           << "\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string yaml = R"(
run: {name: team_text, output_dir: )" +
                           dir + R"(, seed: 5, threads_per_rank: 1, versions: 2}
policies:
  - {name: solver, model: {hf: )" +
                           dir + R"(/model, max_seq_len: 1024}}
  - {name: verifier, model: {hf: )" +
                           dir + R"(/model, max_seq_len: 1024}}
workflow: {kind: solver_verifier, roles: {solver: solver, verifier: verifier}, max_rounds: 2}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver}
  - {role: trainer, policy: verifier}
  - {role: rollout, policies: [solver, verifier], ranks: )" +
                           std::to_string(worldSize() - 3) + R"(}
environment: {name: dataset, train: [)" +
                           dir + R"(/math.jsonl], eval_fraction: 0.25, enable_thinking: false,
              reward: {kind: math}}
rollout: {group_size: 2, max_new_tokens: 6, batch_tasks: 4}
trainer: {groups_per_step: 2, lr: 0.0001}
eval: {problems: 2, every: 1}
dataflow: {max_staleness: 2, trajectory_ring: {slots: 256, slot_bytes: 65536}}
)";
  // The paper's prompts take a few hundred tokens of this byte-level vocabulary: with a context
  // shorter than them, every transcript is cut to model.max_seq_len and counted, and the run ends
  // (a trainer is never sent a sequence its model cannot take).
  std::string short_context = yaml;
  for (std::size_t at = 0; (at = short_context.find("max_seq_len: 1024", at)) != std::string::npos;)
    short_context.replace(at, 17, "max_seq_len: 64");
  const json cut = runJob(parseConfig(short_context, "team_text_short"));
  if (worldRank() == 0) {
    EXPECT_EQ(cut["policies"]["solver"]["versions"], 2);
    std::int64_t cuts = 0;
    for (const auto& r : ranksOf(cut, "rollout")) cuts += num(r, "context_cut");
    EXPECT_GT(cuts, 0);
    fs::remove_all(dir + "/checkpoints");
    for (const auto& f : runFilesIn(dir)) fs::remove_all(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const json s = runJob(parseConfig(yaml, "team_text"));
  if (worldRank() != 0) return;
  EXPECT_EQ(s["workflow"], "solver_verifier");
  for (const auto& name : {"solver", "verifier"}) {
    const json& p = s["policies"][name];
    expectPolicyBooksBalance(p, name);
    EXPECT_EQ(p["versions"], 2) << name;
    EXPECT_EQ(p["foreign_trajectories"], 0) << name;
  }
  EXPECT_EQ(s["policies"]["solver"]["produced"], s["policies"]["verifier"]["produced"]);
  const json& reasons = s["reward_reasons"];
  std::int64_t stated = 0;
  for (const auto& [reason, n] : reasons.items())
    if (reason != "unstated") stated += n.get<std::int64_t>();
  EXPECT_EQ(reasons.value("unstated", 0), 0) << reasons.dump();
  EXPECT_EQ(stated, s["produced"].get<std::int64_t>()) << reasons.dump();
  EXPECT_TRUE(s["team_accuracy_end"].is_number());
  EXPECT_EQ(s["roles"]["verifier"]["reward"], "verdict_correct");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace astraflow
