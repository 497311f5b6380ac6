#pragma once
// TaskLeases — the book of tasks handed to holders that can be lost (spawned pools): who holds
// which task, what goes back to the outbox when a holder is lost, and which late results are
// duplicates. Private to src/dataflow; ElasticPools keeps one, tests/dataflow/test_task_leases.cpp
// checks it alone.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "astraflow/core/records.hpp"

namespace astraflow::dataflow_detail {

class TaskLeases {
 public:
  // `holder` took `task` (a holder is any integer id: a spawned pool's index).
  void lease(int holder, const Task& task);
  // A result of `task_id` came back; `role` is a team trajectory's workflow role ("" alone).
  // Releases the lease. False when the result is a late duplicate — the task was re-issued and a
  // result for this role already counted — so the caller drops it.
  bool returned(std::uint64_t task_id, const std::string& role);
  // The holder gave `task_id` back unrun: the task, to be queued again (nullopt when it holds no
  // lease, e.g. a second role's record of the same team task). Its first result counts.
  std::optional<Task> giveBack(std::uint64_t task_id);
  // The holder is lost: its leased tasks, in lease order, to be queued again. Their first
  // result (from whoever runs them) counts; any later one is a duplicate.
  std::vector<Task> lose(int holder);
  // Tasks `holder` holds now.
  std::size_t held(int holder) const;

  std::uint64_t reissued() const { return reissued_count_; }
  std::uint64_t duplicates() const { return duplicates_; }

 private:
  struct Lease {
    int holder;
    std::uint64_t order;  // lease order, so a lost holder's tasks go back in the order they left
    Task task;
  };
  void release(std::map<std::uint64_t, Lease>::iterator it);

  std::map<std::uint64_t, Lease> leases_;  // by task id
  std::map<int, std::size_t> held_;        // leases per holder (the liveness check asks often)
  std::uint64_t next_order_ = 0;
  std::set<std::uint64_t> reissued_;                         // task ids
  std::set<std::pair<std::uint64_t, std::string>> counted_;  // (re-issued task, role) with a result
  std::uint64_t reissued_count_ = 0, duplicates_ = 0;
};

}  // namespace astraflow::dataflow_detail
