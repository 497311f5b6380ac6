#include "astraflow/run/role_entry.hpp"

#include "astraflow/rollout/raas_role.hpp"
#include "astraflow/text/tokenizer.hpp"
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
    ports.served.push_back({name, group, w.weight_stores.at(static_cast<std::size_t>(group)).get()});
  }
  return runRolloutRole(ports);
}

TrainerReport runTrainerOn(RunWiring& w) {
  TrainerPorts ports(w.context(), w.comms.role);
  ports.policy = w.role().policy;
  const auto group = static_cast<std::size_t>(w.policyIndex(ports.policy));
  ports.batches = w.batch_rings.at(group).get();
  ports.store = w.weight_stores.at(group).get();
  ports.tokens = tokenSpecOf(*makeTaskTokenizer());
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
