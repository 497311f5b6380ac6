// bench_async_vs_sync — the same workload run by the dataflow runtime in `mode: async` and in
// `mode: sync` (the colocated-synchronous baseline), back to back in one mpirun:
//
//   mpirun -np 4 build/bin/bench_async_vs_sync [versions] [max_new_tokens]
//
// The workload has long-tailed generation lengths: an untrained policy stops an episode only
// when it happens to sample a stop token, so lengths are geometric up to max_new_tokens (many
// short episodes, a few long ones that hold back the batch they are generated in). Prints time
// per trainer step for each mode, their ratio, and the trainer's wait fraction.
#include <mpi.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/log.hpp"
#include "bench_runtime.hpp"

namespace {

using astraflow::Config;

Config workload(const std::string& mode, int versions, int max_new_tokens, int world, const std::string& dir) {
  const int rollout = world - 2;
  const std::string yaml = "run: {name: bench_" + mode + ", output_dir: " + dir + ", seed: 11, mode: " + mode +
                           ", versions: " + std::to_string(versions) +
                           ", progress_every: 1000000, log_level: warn}\n"
                           "policies:\n"
                           "  - name: solver\n"
                           "    model: {d_model: 64, layers: 2, heads: 4, kv_heads: 2, ffn_hidden: 176, max_seq_len: " +
                           std::to_string(max_new_tokens + 16) +
                           "}\n"
                           "layout:\n"
                           "  - {role: dataflow, ranks: 1}\n"
                           "  - {role: trainer, policy: solver, ranks: 1}\n"
                           "  - {role: rollout, policies: [solver], ranks: " +
                           std::to_string(rollout) +
                           "}\n"
                           "rollout: {group_size: 8, temperature: 1.0, max_new_tokens: " +
                           std::to_string(max_new_tokens) +
                           ", batch_tasks: 32}\n"
                           "trainer: {groups_per_step: 16, lr: 0.0002}\n"
                           "eval: {problems: 0}\n"
                           "dataflow: {max_staleness: 4}\n";
  return astraflow::parseConfig(yaml, "bench_async_vs_sync");
}

}  // namespace

int main(int argc, char** argv) {
  astraflow::MpiEnvironment env(&argc, &argv);
  const auto [world, rank] = astraflow::bench::world();
  if (world < 3) {
    if (rank == 0) std::fprintf(stderr, "bench_async_vs_sync: needs at least 3 ranks (dataflow, trainer, rollout)\n");
    return 2;
  }
  const int versions = argc > 1 ? std::atoi(argv[1]) : 40;
  const int max_new_tokens = argc > 2 ? std::atoi(argv[2]) : 24;
  astraflow::initLogging(rank, "bench", astraflow::LogLevel::Warn);

  struct Row {
    const char* mode;
    double step_s, wait, traj_s;
  } rows[2];
  const char* modes[2] = {"async", "sync"};
  for (int m = 0; m < 2; ++m) {
    const auto s = astraflow::bench::runJob(
        modes[m], [&](const std::string& dir) { return workload(modes[m], versions, max_new_tokens, world, dir); });
    if (rank != 0) continue;
    double step = 0;
    for (const auto& r : s["ranks"]) {
      if (r["role"] == "trainer") step = astraflow::bench::secondsPerStep(r);
    }
    rows[m] = {modes[m], step, s["trainer_wait_fraction"].get<double>(), s["rollout_trajectories_per_s"].get<double>()};
  }
  if (rank == 0) {
    std::printf(
        "bench_async_vs_sync: %d ranks (1 dataflow, 1 trainer, %d rollout), %d versions, 128 trajectories per "
        "step, max_new_tokens %d (geometric lengths)\n",
        world, world - 2, versions, max_new_tokens);
    std::printf("  %-6s %16s %22s %20s\n", "mode", "s / trainer step", "trainer wait fraction", "trajectories / s");
    for (const auto& r : rows) std::printf("  %-6s %16.3f %22.3f %20.1f\n", r.mode, r.step_s, r.wait, r.traj_s);
    std::printf("  sync / async time per step: %.2fx\n", rows[1].step_s / std::max(1e-9, rows[0].step_s));
  }
  return 0;
}
