// wireWindows: a rank's task, trajectory and batch rings and weight stores, created collectively and in one order on
// its pool and link comms; plus RunWiring's run clock, trace events and the RoleContext cut from it.
#include "astraflow/dataflow/run_wiring.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include "astraflow/comm/mpi.hpp"

namespace astraflow {

namespace {

RingGeometry geometryOf(const RingSection& s) { return RingGeometry{s.slots, s.slot_bytes}; }

}  // namespace

double RunWiring::now() const { return mpiSeconds() - t0; }

void RunWiring::event(TraceKind kind, double t_start, std::int64_t version, std::uint64_t bytes, std::uint64_t count,
                      const TraceAbout& about) const {
  if (trace)
    trace->record({labelRank(), roleName(role().role), traceKindName(kind), t_start, now(), version, bytes, count,
                   about.policy, about.total, about.staleness});
}

void RunWiring::counterEvent(const std::string& counter, const std::string& plugin, double t, std::int64_t version,
                             std::uint64_t value) const {
  if (trace) trace->record({labelRank(), roleName(role().role), counter + ":" + plugin, t, now(), version, 0, value});
}

RoleContext RunWiring::context() const {
  RoleContext c(cfg);
  c.rank = rank();
  c.label_rank = labelRank();
  c.role = role().role;
  c.ranks_on_node = ranks_on_node;
  c.device_slot = device_slot;
  c.t0 = t0;
  c.clock_offset = clock_offset;
  c.trace = trace;
  c.reports = reports;
  c.run_dir = run_dir;
  c.run_id = run_id;
  c.resume_version = resume ? resume_version : -1;
  return c;
}

int RunWiring::policyIndex(const std::string& policy) const {
  const auto& groups = map.trainerGroups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].policy == policy) return static_cast<int>(g);
  }
  return -1;
}

void wireWindows(RunWiring& w) {
  const Config& cfg = w.cfg;
  const RoleMap& map = w.map;
  const RoleComms& comms = w.comms;
  const int me = comms.world.rank();
  const int df_rank = map.dataflowRank();
  // Windows, in the same order on every rank (each constructor is collective over its comm).
  for (std::size_t p = 0; p < map.pools().size(); ++p) {
    if (!comms.pools[p].valid()) {
      w.task_rings.emplace_back();
      w.trajectory_rings.emplace_back();
      continue;
    }
    const auto& name = map.pools()[p].name;
    w.task_rings.push_back(std::make_unique<RmaRing>(comms.pools[p], 0, geometryOf(cfg.dataflow.task_ring),
                                                     RmaRing::Consumer::Remote, "task_ring:" + name));
    w.trajectory_rings.push_back(std::make_unique<RmaRing>(comms.pools[p], 0, geometryOf(cfg.dataflow.trajectory_ring),
                                                           RmaRing::Consumer::Host, "trajectory_ring:" + name));
  }
  for (std::size_t g = 0; g < map.trainerGroups().size(); ++g) {
    const auto& group = map.trainerGroups()[g];
    if (comms.trainer_links[g].valid() && !group.world_ranks.empty()) {
      w.batch_rings.push_back(std::make_unique<RmaRing>(comms.trainer_links[g], 0, geometryOf(cfg.dataflow.batch_ring),
                                                        RmaRing::Consumer::Remote, "batch_ring:" + group.policy));
    } else {
      w.batch_rings.emplace_back();
    }
    if (comms.weight_links[g].valid()) {
      // The first trainer rank (at a gateway site: the gateway) measures a version; everyone
      // learns the store's size.
      const int measurer = group.world_ranks.empty() ? df_rank : group.world_ranks.front();
      const std::uint64_t bytes =
          comms.weight_links[g].allreduceMax(me == measurer ? w.weight_version_bytes(group.policy) : std::uint64_t{0});
      w.weight_stores.push_back(std::make_unique<WeightStore>(comms.weight_links[g], 0, bytes, group.policy,
                                                              weightStoreOptions(cfg.weights)));
      // The rollout ranks of each node share one copy of the versions they pull.
      w.node_weights.push_back(std::make_unique<NodeWeights>(comms.weight_links[g], w.role().role == Role::Rollout,
                                                             bytes, group.policy,
                                                             nodeRelayOptions(cfg.weights, bytes)));
    } else {
      w.weight_stores.emplace_back();
      w.node_weights.emplace_back();
    }
  }
}

}  // namespace astraflow
