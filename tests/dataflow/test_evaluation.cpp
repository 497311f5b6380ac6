// Evaluation as the paper reports it (docs/tasks.md "Evaluation"), end to end under MPI: named
// eval sets reported separately with their mean, every round at one weight version, the
// per-problem table read back by h5py, run.keep_best, and `astraflow eval` on a checkpoint and on
// a Hugging Face folder. The verifier (eval_verifier.py) gives rewards the check can predict from
// each problem's reference, so a problem recorded under the wrong set, index or sample fails.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "astraflow/run/hf_folders.hpp"
#include "runtime_test_util.hpp"

namespace astraflow {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Runs a shell command; its exit status and its output (stdout, and stderr unless `quiet`).
std::pair<int, std::string> shell(const std::string& command, bool quiet = false) {
  std::string out;
  FILE* pipe = popen((command + (quiet ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void writeRows(const std::string& path, int first, int count, const char* question) {
  std::ofstream rows(path);
  for (int a = first; a < first + count; ++a)
    rows << json{{"prompt", fmt::format(fmt::runtime(question), a)}, {"answer", std::to_string(a)}}.dump() << "\n";
}

json answersOf(int first, int count) {
  json a = json::array();
  for (int i = first; i < first + count; ++i) a.push_back(std::to_string(i));
  return a;
}

TEST(Evaluation, NamedSetsOneVersionPerRoundTableAndKeepBest) {
  const std::string python = env("ASTRAFLOW_PYTHON"), check = env("ASTRAFLOW_EVAL_CHECK"),
                    verifier = env("ASTRAFLOW_EVAL_VERIFIER"), cli = env("ASTRAFLOW_CLI");
  ASSERT_FALSE(python.empty() || check.empty() || verifier.empty() || cli.empty()) << "test environment not set";
  const auto dir = sharedRunDir("eval_sets");
  if (worldRank() == 0) {
    fs::create_directories(dir);
    InitModelOptions init;
    init.model = modelPreset("tiny-qwen3");
    initModel(dir + "/model", init);
    writeRows(dir + "/train.jsonl", 100, 24, "What is {} minus zero?");
    writeRows(dir + "/easy.jsonl", 3, 6, "Say {}.");
    writeRows(dir + "/hard.jsonl", 30, 8, "What is {} squared, minus its square, plus itself?");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string yaml = "run: {name: eval_sets, output_dir: " + dir +
                           "/run, seed: 3, threads_per_rank: 1, versions: 4, checkpoint_every: 2, keep_best: true}\n"
                           "policies:\n  - {name: solver, model: {hf: " +
                           dir +
                           "/model, max_seq_len: 256}}\n"
                           "layout:\n  - {role: dataflow, ranks: 1}\n  - {role: trainer, policy: solver}\n"
                           "  - {role: rollout, policies: [solver], ranks: " +
                           std::to_string(worldSize() - 2) + "}\nenvironment: {name: dataset, train: [" + dir +
                           "/train.jsonl], eval_fraction: 0.25, enable_thinking: false,\n"
                           "  reward: {kind: command, persistent: true, command: [" +
                           python + ", " + verifier +
                           "]}}\n"
                           "rollout: {group_size: 2, max_new_tokens: 5, batch_tasks: 4}\n"
                           "trainer: {groups_per_step: 2, lr: 0.001}\n"
                           "eval: {problems: 3, every: 2, temperature: 0.8, sets: [{name: easy, path: " +
                           dir + "/easy.jsonl}, {name: hard, path: [" + dir +
                           "/hard.jsonl], problems: 4, samples: 3}]}\n";
  const json summary = runJob(parseConfig(yaml, "eval_sets"));
  if (worldRank() == 0) {
    // Rounds at v0, v2 and the final v4; the summary's sets are the last round's.
    EXPECT_EQ(summary["eval_rounds"], 3);
    EXPECT_EQ(summary["eval_version_end"], 4);
    const json& sets = summary["eval_sets"];
    ASSERT_EQ(sets.size(), 3U) << sets.dump();
    EXPECT_EQ(sets["held_out"]["problems"], 3);
    EXPECT_EQ(sets["easy"]["problems"], 6);
    EXPECT_EQ(sets["hard"]["problems"], 4);
    EXPECT_EQ(sets["hard"]["samples"], 3);
    const double mean = (sets["held_out"]["accuracy"].get<double>() + sets["easy"]["accuracy"].get<double>() +
                         sets["hard"]["accuracy"].get<double>()) /
                        3.0;
    EXPECT_NEAR(summary["eval_accuracy_end"].get<double>(), mean, 1e-12);
    // Every easy row is 3..8: rewards 1, 0.5 or by the response; the set's accuracy is above 0.
    EXPECT_GT(sets["easy"]["accuracy"].get<double>(), 0.0);
    ASSERT_TRUE(summary["best_checkpoint"].is_object()) << summary["best_checkpoint"].dump();
    std::ofstream(dir + "/summary.json") << summary.dump();
    // The table, read by h5py.
    const json run_sets = {{"held_out", {{"answers", nullptr}, {"problems", 3}, {"samples", 1}}},
                           {"easy", {{"answers", answersOf(3, 6)}, {"problems", 6}, {"samples", 1}}},
                           {"hard", {{"answers", answersOf(30, 4)}, {"problems", 4}, {"samples", 3}}}};
    const auto [rc, out] = shell(python + " " + check + " " + dir + "/run/eval.h5 '" + run_sets.dump() + "' " + dir +
                                 "/summary.json " + dir + "/run");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("ok"), std::string::npos) << out;
    // astraflow eval: the same sets from the kept checkpoint, and from the Hugging Face folder.
    std::ofstream(dir + "/eval.yaml") << yaml;
    const auto [rc_ckpt, out_ckpt] = shell(cli + " eval " + dir + "/eval.yaml --checkpoint " + dir +
                                               "/run/checkpoints/best.solver.h5 --out " + dir + "/offline",
                                           /*quiet=*/true);
    ASSERT_EQ(rc_ckpt, 0) << out_ckpt;
    const json result = json::parse(out_ckpt);
    EXPECT_EQ(result["version"], summary["eval_best_version"]);
    EXPECT_EQ(result["backend"], "engine");
    EXPECT_EQ(result["sets"].size(), 3U);
    const auto [rc_table, out_table] =
        shell(python + " " + check + " " + dir + "/offline/eval.h5 '" + run_sets.dump() + "'");
    EXPECT_EQ(rc_table, 0) << out_table;
    const auto [rc_hf, out_hf] = shell(cli + " eval " + dir + "/eval.yaml --hf " + dir + "/model", /*quiet=*/true);
    ASSERT_EQ(rc_hf, 0) << out_hf;
    EXPECT_EQ(json::parse(out_hf)["version"], 0);
    // Neither, or a team config: refused with a message.
    const auto [rc_none, out_none] = shell(cli + " eval " + dir + "/eval.yaml");
    EXPECT_EQ(rc_none, 1);
    EXPECT_NE(out_none.find("--checkpoint"), std::string::npos) << out_none;
    fs::remove_all(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace astraflow
