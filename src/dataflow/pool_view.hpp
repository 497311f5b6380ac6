#pragma once
// The config a spawned pool and its dataflow rank both build its role map from: the run's
// config with the layout {gateway: the dataflow rank, rollout: the pool's ranks, with the first
// rollout pool's backend}. Its policies
// are in the home trainer groups' order, so weight store g is the same policy on both sides.
// Private to src/dataflow.
#include <string>

#include "astraflow/core/config.hpp"

namespace astraflow::dataflow_detail {

inline Config poolView(const Config& base, int ranks, const std::string& name) {
  Config c = base;
  c.policies.clear();
  for (const auto& e : base.layout) {
    if (e.role != Role::Trainer) continue;
    for (const auto& p : base.policies) {
      if (p.name == e.policy) c.policies.push_back(p);
    }
  }
  LayoutEntry hub;
  hub.role = Role::Gateway;
  LayoutEntry pool;
  pool.role = Role::Rollout;
  pool.ranks = ranks;
  pool.pool = name;
  // A spawned pool generates as the layout's first rollout pool does: the same backend (an
  // engine, servers or the simulated accelerator), never silently the default engine.
  for (const auto& e : base.layout) {
    if (e.role == Role::Rollout) {
      pool.backend = e.backend;
      break;
    }
  }
  for (const auto& p : c.policies) pool.policies.push_back(p.name);
  c.layout = {hub, pool};
  c.cross_site = {};
  c.elastic.mode = ElasticMode::Off;
  return c;
}

}  // namespace astraflow::dataflow_detail
