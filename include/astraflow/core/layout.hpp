#pragma once
// The rank-role map: which world rank plays which role (docs/architecture.md §2). Pure data, no MPI,
// so it can be computed, printed and tested anywhere.
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"

namespace astraflow {

struct RankRole {
  int world_rank = 0;
  Role role = Role::Rollout;
  std::string policy;                 // trainer: its policy
  std::vector<std::string> policies;  // rollout: policies served
  int pool = -1;                      // rollout: index into RoleMap::pools
  std::string pool_name;              // rollout: its pool's name
  int index_in_group = 0;             // rank within its role group (trainer group, pool)

  std::string label() const;  // "dataflow", "trainer:solver", "rollout:pool1"
};

struct PoolLayout {
  std::string name;
  std::vector<std::string> policies;
  std::vector<int> world_ranks;  // its rollout ranks
};

struct TrainerGroupLayout {
  std::string policy;
  std::vector<int> world_ranks;
};

class RoleMap {
 public:
  // Throws LayoutError("layout needs N ranks, mpirun started M") when they differ.
  RoleMap(const Config& config, int world_size);

  const RankRole& of(int world_rank) const { return ranks_.at(world_rank); }
  const std::vector<RankRole>& ranks() const { return ranks_; }
  int dataflowRank() const { return dataflow_rank_; }
  const std::vector<PoolLayout>& pools() const { return pools_; }
  const std::vector<TrainerGroupLayout>& trainerGroups() const { return trainer_groups_; }

  // A table, one line per layout entry: roles and the world ranks that play them.
  std::string describe() const;

 private:
  std::vector<RankRole> ranks_;
  std::vector<PoolLayout> pools_;
  std::vector<TrainerGroupLayout> trainer_groups_;
  int dataflow_rank_ = 0;
};

}  // namespace astraflow
