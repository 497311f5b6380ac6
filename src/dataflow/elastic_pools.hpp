#pragma once
// ElasticPools — rollout pools the dataflow rank adds at run time with MPI_Comm_spawn and
// retires again (docs/elastic.md, docs/architecture.md §9). A spawned pool is the same binary
// (`astraflow spawned-pool`), joined to the dataflow rank by an intercommunicator merged into
// one comm whose rank 0 is the dataflow rank: on it live the pool's task and trajectory rings and
// one mirror weight store per policy, which the dataflow rank republishes into whenever a
// policy publishes (as a gateway does for a remote site). Its rollout ranks run the unchanged
// RaaS loop. Tasks pushed to a spawned pool are leased: if the pool is lost (a process gone, or
// silent for elastic.lease_seconds while holding tasks) they are re-issued to other pools, and a
// late duplicate result is dropped by task id. Private to src/dataflow.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "dataflow/task_leases.hpp"
#include "dataflow/task_sink.hpp"

namespace astraflow::dataflow_detail {

inline constexpr int kSpawnRankLabel = 10000;  // spawned pool k labels its ranks 10000·(k+1) + r

struct SpawnedPool {
  enum class State { Active, Retiring, Gone, Lost };
  int index = 0;
  std::string name;
  int ranks = 0;
  State state = State::Active;
  Comm inter;                   // to the spawned job (released by disconnecting)
  Comm merged;                  // dataflow rank (0) + the pool's ranks: its windows live here
  std::unique_ptr<Config> cfg;  // the pool's view: layout {gateway (this rank), rollout (ranks)}
  std::unique_ptr<RoleMap> map;
  std::unique_ptr<RoleComms> comms;
  std::unique_ptr<RunWiring> wiring;  // its mirror stores; its rings live in the home wiring
  int ring = -1;                      // index in the home wiring's task/trajectory rings
  std::vector<int> pids;
  std::vector<std::string> hosts;
  int ended = 0;
  int ends_to_push = 0;  // end-of-stream records still to go into its task ring (retiring)
  double last_heard = 0;
  std::uint64_t produced = 0;
  std::vector<RankReport> reports;  // its ranks' reports, gathered when it is retired
  std::unique_ptr<TaskSink> sink;   // its task ring; each task taken is leased to the pool
};

class ElasticPools {
 public:
  explicit ElasticPools(RunWiring& home);
  ~ElasticPools();

  // Spawns `ranks` rollout ranks as a new pool serving every policy; false (logged, retried
  // later with backoff by the caller's next decision) when the spawn fails.
  bool spawn(int ranks);
  // Starts retiring pools, preferring `suspect` ones, until `ranks` fewer are active (or none is
  // left): their rings get an end-of-stream per rank after the tasks already queued.
  int retire(int ranks, const std::set<std::string>& suspect_uids);
  // Every policy published: mirror stores republish. `store(g)` is policy g's home store.
  void published(std::size_t group, std::int64_t version, std::span<const std::byte> bytes);
  // A trajectory came back: returns false for a late duplicate of a re-issued task (drop it) and
  // for a task a server-backed pool gave back unrun (a failed generation: status Returned), which
  // is then in `given_back`, to be queued again.
  bool returned(const Trajectory& t, std::optional<Task>& given_back);
  // Liveness and leases; a lost pool's leased tasks go to `reissue`.
  bool progress(const std::function<void(Task)>& reissue);
  // End of the run: an end-of-stream per rank to every active pool (`push` pushes one record to a ring).
  void endStreams(const std::function<void(int ring)>& push_end);
  // Retired pools whose ranks all ended are disconnected (collective with them).
  void reap();

  int activeRanks() const;  // ranks of pools not retiring/gone/lost
  struct PoolInfo {
    std::string name;
    int ranks;
    std::int32_t label;  // its ranks' label base, kSpawnRankLabel·(k+1)
  };
  std::vector<PoolInfo> activePools() const;
  std::uint64_t ranksEver() const;  // every rank ever spawned
  std::uint64_t ranksDone() const;  // ranks that ended, or were lost
  // Where active pools take tasks (leased), with each pool's rank count.
  std::vector<std::pair<TaskSink*, int>> activeSinks() const;
  std::string uidOfRank(std::int32_t label) const;  // "spawn<k>"
  int ranksOf(const std::string& uid) const;
  ElasticFigures figures() const;
  std::vector<RankReport> childReports() const;

 private:
  SpawnedPool* poolOfLabel(std::int32_t label);
  void lose(SpawnedPool& p, const std::string& why, const std::function<void(Task)>& reissue);
  void disconnect(SpawnedPool& p);

  RunWiring& home_;
  std::vector<std::unique_ptr<SpawnedPool>> pools_;
  TaskLeases leases_;  // tasks pushed to spawned pools, by pool index
  std::uint64_t spawned_ranks_ = 0, spawn_failures_ = 0, retired_ranks_ = 0, lost_ranks_ = 0;
  std::uint64_t unreturned_ = 0;
  std::uint64_t given_back_ = 0;  // tasks spawned ranks gave back unrun (returned())
  double next_liveness_check_ = 0;
  std::vector<std::byte> end_record_;  // an encoded end-of-stream task
};

}  // namespace astraflow::dataflow_detail
