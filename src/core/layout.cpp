// RoleMap: the config's layout laid over the world's ranks in order (trainer groups, rollout pools, the dataflow or
// gateway rank), a LayoutError when mpirun started another number of ranks, and describe(), the printed table.
#include "astraflow/core/layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "astraflow/core/error.hpp"

namespace astraflow {

std::string RankRole::label() const {
  switch (role) {
    case Role::Dataflow: return "dataflow";
    case Role::Trainer: return "trainer:" + policy;
    case Role::Rollout: return "rollout:" + pool_name;
    case Role::Gateway: return "gateway";
  }
  return "?";
}

RoleMap::RoleMap(const Config& config, int world_size) {
  const int needed = config.layoutRanks();
  if (needed != world_size) {
    throw LayoutError(
        fmt::format("layout needs {} ranks, mpirun started {} (config {})", needed, world_size, config.source));
  }
  int next = 0;
  for (const auto& entry : config.layout) {
    TrainerGroupLayout* group = nullptr;
    PoolLayout* pool = nullptr;
    if (entry.role == Role::Trainer) {
      trainer_groups_.push_back({entry.policy, {}});
      group = &trainer_groups_.back();
    } else if (entry.role == Role::Rollout) {
      pools_.push_back({entry.pool, entry.policies, {}});
      pool = &pools_.back();
    } else {
      dataflow_rank_ = next;  // the dataflow rank, or a remote site's gateway: the job's hub
    }
    for (int i = 0; i < entry.ranks; ++i, ++next) {
      RankRole r;
      r.world_rank = next;
      r.role = entry.role;
      r.policy = entry.policy;
      r.policies = entry.policies;
      r.index_in_group = i;
      if (group) group->world_ranks.push_back(next);
      if (pool) {
        r.pool = static_cast<int>(pools_.size()) - 1;
        r.pool_name = pool->name;
        pool->world_ranks.push_back(next);
      }
      ranks_.push_back(std::move(r));
    }
  }
  if (config.isGatewaySite()) {
    // No trainers at a remote site: one rank-less group per policy gives its weight store (the
    // gateway's mirror, read by the local pool) the same index as at home.
    for (const auto& p : config.policies) trainer_groups_.push_back({p.name, {}});
  }
}

static std::string rankList(const std::vector<int>& ranks) {
  if (ranks.size() > 1 && ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size())) {
    return fmt::format("{}-{}", ranks.front(), ranks.back());
  }
  return fmt::format("{}", fmt::join(ranks, ","));
}

std::string RoleMap::describe() const {
  std::string out = fmt::format("role map ({} ranks)\n", ranks_.size());
  out += fmt::format("  {:<10} {:<10} {:<24} {}\n", "role", "ranks", "policy/pool", "world ranks");
  out += fmt::format("  {:<10} {:<10} {:<24} {}\n",
                     ranks_.at(dataflow_rank_).role == Role::Gateway ? "gateway" : "dataflow", 1, "-", dataflow_rank_);
  for (const auto& g : trainer_groups_) {
    if (g.world_ranks.empty()) continue;
    out +=
        fmt::format("  {:<10} {:<10} {:<24} {}\n", "trainer", g.world_ranks.size(), g.policy, rankList(g.world_ranks));
  }
  for (const auto& p : pools_) {
    out += fmt::format("  {:<10} {:<10} {:<24} {}\n", "rollout", p.world_ranks.size(),
                       fmt::format("{} [{}]", p.name, fmt::join(p.policies, ",")), rankList(p.world_ranks));
  }
  return out;
}

}  // namespace astraflow
