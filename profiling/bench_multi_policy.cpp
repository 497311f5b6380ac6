// bench_multi_policy — the solver–verifier workload (two trainable policies, a trainer group
// and a weight stream each) run by the dataflow runtime in `mode: async` and in `mode: sync`
// (colocated-synchronous: every team episode of a step generated with the current weights of
// both policies while both trainers wait), back to back in one mpirun:
//
//   mpirun -np 5 build/bin/bench_multi_policy [versions] [max_new_tokens]
//
// Long-tailed episodes: the policies are untrained, so a turn ends only when a stop token
// happens to be sampled (geometric lengths up to max_new_tokens), and a team episode takes one
// to three solver–verifier rounds depending on the verdicts. Prints, per mode, each trainer's
// time per iteration and wait fraction, and the sync/async ratio (the paper's 2.7× figure is
// for 8B models on 8 H100s; this is the same comparison at toy scale on this machine).
#include <mpi.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/log.hpp"
#include "bench_runtime.hpp"

namespace {

astraflow::Config workload(const std::string& mode, int versions, int max_new_tokens, int world,
                           const std::string& dir) {
  const std::string model = "{d_model: 64, layers: 2, heads: 4, kv_heads: 2, ffn_hidden: 176, max_seq_len: " +
                            std::to_string(3 * (2 * max_new_tokens + 12)) + "}";
  const std::string yaml =
      "run: {name: bench_team_" + mode + ", output_dir: " + dir + ", seed: 13, mode: " + mode +
      ", versions: " + std::to_string(versions) +
      ", progress_every: 1000000, log_level: warn}\n"
      "policies:\n"
      "  - {name: solver, model: " +
      model +
      "}\n"
      "  - {name: verifier, model: " +
      model +
      "}\n"
      "workflow: {kind: solver_verifier, roles: {solver: solver, verifier: verifier}, max_rounds: 3}\n"
      "layout:\n"
      "  - {role: dataflow, ranks: 1}\n"
      "  - {role: trainer, policy: solver, ranks: 1}\n"
      "  - {role: trainer, policy: verifier, ranks: 1}\n"
      "  - {role: rollout, policies: [solver, verifier], ranks: " +
      std::to_string(world - 3) +
      "}\n"
      "rollout: {group_size: 8, temperature: 1.0, max_new_tokens: " +
      std::to_string(max_new_tokens) +
      ", batch_tasks: 32}\n"
      "trainer: {groups_per_step: 8, lr: 0.0002}\n"
      "eval: {problems: 0}\n"
      "dataflow: {max_staleness: 4, trajectory_ring: {slots: 2048, slot_bytes: 1024}, "
      "batch_ring: {slots: 8, slot_bytes: 4194304}}\n";
  return astraflow::parseConfig(yaml, "bench_multi_policy");
}

}  // namespace

int main(int argc, char** argv) {
  astraflow::MpiEnvironment env(&argc, &argv);
  const auto [world, rank] = astraflow::bench::world();
  if (world < 4) {
    if (rank == 0) {
      std::fprintf(stderr, "bench_multi_policy: needs at least 4 ranks (dataflow, two trainers, rollout)\n");
    }
    return 2;
  }
  const int versions = argc > 1 ? std::atoi(argv[1]) : 20;
  const int max_new_tokens = argc > 2 ? std::atoi(argv[2]) : 16;
  astraflow::initLogging(rank, "bench", astraflow::LogLevel::Warn);

  struct Row {
    std::map<std::string, double> step_s, wait;
    double wall = 0, traj_s = 0;
  } rows[2];
  const char* modes[2] = {"async", "sync"};
  for (int m = 0; m < 2; ++m) {
    const auto s = astraflow::bench::runJob(std::string("team_") + modes[m], [&](const std::string& dir) {
      return workload(modes[m], versions, max_new_tokens, world, dir);
    });
    if (rank != 0) continue;
    for (const auto& r : s["ranks"]) {
      if (r["role"] != "trainer") continue;
      const std::string policy = r["label"].get<std::string>().substr(8);  // "trainer:<policy>"
      rows[m].step_s[policy] = astraflow::bench::secondsPerStep(r);
      rows[m].wait[policy] = r["wait_fraction"].get<double>();
    }
    rows[m].wall = s["segment_wall_seconds"].get<double>();
    rows[m].traj_s = s["rollout_trajectories_per_s"].get<double>();
  }
  if (rank == 0) {
    std::printf(
        "bench_multi_policy: solver_verifier, %d ranks (1 dataflow, 2 trainers, %d rollout), %d versions per "
        "policy, 64 team episodes per step, max_new_tokens %d, up to 3 rounds\n",
        world, world - 3, versions, max_new_tokens);
    std::printf("  %-6s %-9s %16s %14s %10s %20s\n", "mode", "trainer", "s / iteration", "wait fraction", "wall s",
                "trajectories / s");
    for (int m = 0; m < 2; ++m) {
      for (const auto& [policy, step] : rows[m].step_s) {
        std::printf("  %-6s %-9s %16.3f %14.3f %10.1f %20.1f\n", modes[m], policy.c_str(), step, rows[m].wait[policy],
                    rows[m].wall, rows[m].traj_s);
      }
    }
    for (const auto& [policy, step] : rows[0].step_s) {
      std::printf("  sync / async time per iteration (%s): %.2fx\n", policy.c_str(),
                  rows[1].step_s[policy] / std::max(1e-9, step));
    }
    std::printf("  sync / async wall time: %.2fx\n", rows[1].wall / std::max(1e-9, rows[0].wall));
  }
  return 0;
}
