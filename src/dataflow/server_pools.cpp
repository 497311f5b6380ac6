// ServerPools: the books of local pools that generate on external HTTP servers: tasks leased per pool, tasks given
// back requeued, late duplicates dropped, and a pool whose every rank ended early declared lost.
#include "dataflow/server_pools.hpp"

#include <spdlog/spdlog.h>

namespace astraflow::dataflow_detail {

ServerPools::ServerPools(const Config& config, const RoleMap& map) {
  // Ranks that start an OpenEnv server leave their pool too when its program cannot run
  // (openEnvUnavailable): their pools are booked as server pools, whatever engine they use.
  const bool env_server = config.environment.name == "openenv" && !config.environment.openenv.command.empty();
  const auto& pools = map.pools();
  for (std::size_t i = 0; i < pools.size(); ++i) {
    all_ranks_.push_back(pools[i].world_ranks.size());
    for (const auto& e : config.layout) {
      if (e.role == Role::Rollout && e.pool == pools[i].name && (e.backend.http() || env_server))
        pools_.push_back({i, pools[i].world_ranks.size(), 0});
    }
  }
}

ServerPools::Pool* ServerPools::find(std::size_t pool) {
  for (auto& p : pools_)
    if (p.index == pool) return &p;
  return nullptr;
}

const ServerPools::Pool* ServerPools::find(std::size_t pool) const {
  for (const auto& p : pools_)
    if (p.index == pool) return &p;
  return nullptr;
}

bool ServerPools::served(std::size_t pool) const { return find(pool) != nullptr; }

bool ServerPools::lost(std::size_t pool) const {
  const Pool* p = find(pool);
  return p && p->lost_ranks >= p->ranks;
}

std::unique_ptr<TaskSink> ServerPools::sink(std::size_t pool, RmaRing& ring) {
  return std::make_unique<LeasedRingSink>(ring, leases_, static_cast<int>(pool));
}

ServerPools::Verdict ServerPools::arrived(std::size_t index, const Trajectory& t, std::vector<Task>& requeue) {
  Pool* pool = find(index);
  const bool given_back = t.status == static_cast<std::uint8_t>(TrajectoryStatus::Returned);
  if (isEndOfStream(t)) {
    if (!pool || !given_back) return Verdict::Ended;
    ++ranks_lost_;
    if (++pool->lost_ranks < pool->ranks) return Verdict::Ended;
    // Every rank of the pool has left: what it still held (tasks in its ring included) goes back.
    ++pools_lost_;
    requeue = leases_.lose(static_cast<int>(pool->index));
    spdlog::warn("rollout pool {} lost: every rank's server was lost; {} tasks it held go to the other pools",
                 pool->index, requeue.size());
    return Verdict::PoolLost;
  }
  if (given_back) {
    // A team task comes back once per role; the first record re-issues it, the others find no lease.
    if (auto task = leases_.giveBack(t.task_id)) {
      ++returned_;
      requeue.push_back(std::move(*task));
    }
    return Verdict::Requeue;
  }
  return leases_.returned(t.task_id, t.role) ? Verdict::Route : Verdict::Duplicate;
}

std::size_t ServerPools::liveRanks(std::size_t pool) const {
  const Pool* p = find(pool);
  const std::size_t ranks = pool < all_ranks_.size() ? all_ranks_[pool] : 0;
  return p ? ranks - std::min(ranks, p->lost_ranks) : ranks;
}

}  // namespace astraflow::dataflow_detail
