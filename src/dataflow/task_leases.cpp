// TaskLeases: which holder (a spawned pool) holds which task, the tasks a lost holder's leases give back in lease
// order, and which late results of re-issued tasks are duplicates to drop.
#include "dataflow/task_leases.hpp"

#include <algorithm>

namespace astraflow::dataflow_detail {

void TaskLeases::lease(int holder, const Task& task) {
  if (const auto it = leases_.find(task.task_id); it != leases_.end()) release(it);
  leases_[task.task_id] = {holder, next_order_++, task};
  ++held_[holder];
}

void TaskLeases::release(std::map<std::uint64_t, Lease>::iterator it) {
  --held_[it->second.holder];
  leases_.erase(it);
}

bool TaskLeases::returned(std::uint64_t task_id, const std::string& role) {
  if (const auto it = leases_.find(task_id); it != leases_.end()) release(it);
  if (!reissued_.count(task_id)) return true;
  // A re-issued task: the first result per role counts, a late one from the lost holder does not.
  if (!counted_.emplace(task_id, role).second) {
    ++duplicates_;
    return false;
  }
  return true;
}

std::optional<Task> TaskLeases::giveBack(std::uint64_t task_id) {
  const auto it = leases_.find(task_id);
  if (it == leases_.end()) return std::nullopt;
  Task task = it->second.task;
  reissued_.insert(task_id);
  ++reissued_count_;
  release(it);
  return task;
}

std::vector<Task> TaskLeases::lose(int holder) {
  std::vector<const Lease*> lost;
  for (const auto& [id, lease] : leases_) {
    if (lease.holder == holder) lost.push_back(&lease);
  }
  std::sort(lost.begin(), lost.end(), [](const Lease* a, const Lease* b) { return a->order < b->order; });
  std::vector<Task> out;
  for (const Lease* l : lost) {
    reissued_.insert(l->task.task_id);
    ++reissued_count_;
    out.push_back(l->task);
  }
  for (const auto& t : out) release(leases_.find(t.task_id));
  return out;
}

std::size_t TaskLeases::held(int holder) const {
  const auto it = held_.find(holder);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace astraflow::dataflow_detail
