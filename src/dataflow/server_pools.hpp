#pragma once
// ServerPools — the books of the local pools whose ranks generate on external servers
// (layout[i].backend.kind: http; docs/rollout-backends.md, "Faults"): every task handed to such a
// pool is leased, so that a task a rank gives back (its server failed past the retries: a
// trajectory of status Returned) goes back to its outbox whole, metadata and all; a rank whose
// server stayed silent ends its stream early (an end-of-stream record of status Returned), and
// when every rank of a pool has, the pool is lost: its leased tasks are re-issued to the other
// places and it takes no more. Pools whose ranks start an OpenEnv server (environment.openenv.command)
// are booked the same way: a rank leaves when that server's program cannot run. Private to src/dataflow.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/records.hpp"
#include "dataflow/task_leases.hpp"
#include "dataflow/task_sink.hpp"

namespace astraflow::dataflow_detail {

class ServerPools {
 public:
  ServerPools(const Config& config, const RoleMap& map);

  bool any() const { return !pools_.empty(); }
  bool served(std::size_t pool) const;  // the pool generates on servers
  bool lost(std::size_t pool) const;
  // The place a server pool's tasks go: its ring, each task leased to the pool.
  std::unique_ptr<TaskSink> sink(std::size_t pool, RmaRing& ring);

  // What a trajectory from a server pool means for the dataflow rank.
  enum class Verdict {
    Route,      // a result: route it on
    Duplicate,  // a late result of a task already re-issued and answered: drop it (counted)
    Requeue,    // a task given back: `requeue` holds it, to go to the front of its outbox
    Ended,      // the rank's end of stream
    PoolLost,   // the rank's end of stream, and the last of its pool's: `requeue` holds the pool's tasks
  };
  // `t` came from the ring of local pool `pool`, a server pool.
  Verdict arrived(std::size_t pool, const Trajectory& t, std::vector<Task>& requeue);

  // Ranks of `pool` still to be sent an end-of-stream task (lost ranks have left already).
  std::size_t liveRanks(std::size_t pool) const;

  std::uint64_t tasksReturned() const { return returned_; }
  std::uint64_t duplicates() const { return leases_.duplicates(); }
  std::uint64_t reissued() const { return leases_.reissued(); }
  std::uint64_t ranksLost() const { return ranks_lost_; }
  std::uint64_t poolsLost() const { return pools_lost_; }

 private:
  struct Pool {
    std::size_t index = 0;  // in the layout's pools
    std::size_t ranks = 0;
    std::size_t lost_ranks = 0;
  };
  Pool* find(std::size_t pool);
  const Pool* find(std::size_t pool) const;

  std::vector<Pool> pools_;
  std::vector<std::size_t> all_ranks_;  // every local pool's rank count, by index
  TaskLeases leases_;
  std::uint64_t returned_ = 0, ranks_lost_ = 0, pools_lost_ = 0;
};

}  // namespace astraflow::dataflow_detail
