// runRole: a rank's role loop; runRolloutOn and runTrainerOn first cut RolloutPorts / TrainerPorts (rings, weight
// stores, the trainer's export-hf hook) out of the RunWiring, so those roles never see the wiring.
#include "astraflow/run/role_entry.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/rollout/raas_role.hpp"
#include "astraflow/run/hf_folders.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/trainer/trainer_role.hpp"

namespace astraflow {

RolloutReport runRolloutOn(RunWiring& w) {
  const int pool = w.role().pool;
  RolloutPorts ports(w.context());
  ports.pool = pool;
  ports.tasks = w.task_rings.at(static_cast<std::size_t>(pool)).get();
  ports.trajectories = w.trajectory_rings.at(static_cast<std::size_t>(pool)).get();
  for (const auto& name : w.role().policies) {
    const int group = w.policyIndex(name);
    const auto g = static_cast<std::size_t>(group);
    ports.served.push_back({name, group, w.weight_stores.at(g).get(), w.node_weights.at(g).get()});
  }
  for (const auto& e : w.cfg.layout) {
    if (e.role == Role::Rollout && e.pool == w.role().pool_name) ports.backend = e.backend;
  }
  auto& sim = ports.backend.simulated;
  if (ports.backend.isSimulated() && sim.lengths == SimulatedBackendSpec::Lengths::Empirical) {
    // A real run's generated-token counts: what the simulated pool draws from.
    for (const auto& t : io::readTrajectories(sim.trajectories)) {
      int generated = 0;
      for (const auto m : t.policy_mask) generated += m;
      if (generated > 0) sim.samples.push_back(generated);
    }
    if (sim.samples.empty()) {
      throw Error(fmt::format("layout backend lengths.trajectories: {} holds no generated tokens", sim.trajectories));
    }
  }
  ports.index_in_pool = w.role().index_in_group;
  return runRolloutRole(ports);
}

TrainerReport runTrainerOn(RunWiring& w) {
  TrainerPorts ports(w.context(), w.comms.role);
  ports.policy = w.role().policy;
  const auto group = static_cast<std::size_t>(w.policyIndex(ports.policy));
  ports.batches = w.batch_rings.at(group).get();
  ports.store = w.weight_stores.at(group).get();
  ports.tokens = tokenSpecOf(*makeEnvironmentTokenizer(w.cfg.environment));
  // Written beside, then renamed: a reader of <run>/hf/ never sees a half-written folder.
  const std::filesystem::path run_dir = w.context().run_dir;
  ports.export_hf = [run_dir, policy = ports.policy](const std::filesystem::path& checkpoint, std::int64_t version) {
    const std::filesystem::path out = run_dir / "hf" / fmt::format("{}_step_{}", policy, version);
    const std::filesystem::path tmp = out.string() + ".tmp";
    std::filesystem::remove_all(tmp);
    ExportHfOptions options;
    options.policy = policy;
    try {
      exportHf(checkpoint, tmp, options);
      std::filesystem::remove_all(out);
      std::filesystem::rename(tmp, out);
    } catch (const std::exception& e) {  // the checkpoint is there: `astraflow export-hf` can redo it
      spdlog::warn("run.export_hf_every: version {} of {} not exported: {}", version, policy, e.what());
      std::error_code ec;
      std::filesystem::remove_all(tmp, ec);
    }
  };
  return runTrainerRole(ports);
}

RoleReport runRole(RunWiring& w) {
  switch (w.role().role) {
    case Role::Dataflow: return runDataflowRole(w);
    case Role::Rollout: return runRolloutOn(w);
    case Role::Trainer: return runTrainerOn(w);
    case Role::Gateway: return runGatewayRole(w);
  }
  return {};
}

}  // namespace astraflow
