#pragma once
// Where the dataflow rank hands tasks out. Three kinds of place take them: a local pool's task
// ring (RingSink), a spawned pool (its ring, the task leased to the pool: ElasticPools), and the
// remote sites together (credit-gated, sent over UCX: SiteHub). The outbox's round robin
// (DataflowRank::flushOutbox) treats them alike and knows none of them. Private to src/dataflow.
#include <cstddef>
#include <span>

#include "astraflow/comm/rma_ring.hpp"
#include "astraflow/core/records.hpp"
#include "dataflow/task_leases.hpp"

namespace astraflow::dataflow_detail {

class TaskSink {
 public:
  virtual ~TaskSink() = default;
  // Takes `task` (already encoded as `record`) if there is room now; never waits. False: the
  // caller tries the next sink, and the task stays in its outbox.
  virtual bool tryPush(const Task& task, std::span<const std::byte> record) = 0;
};

// A local pool's task ring (the ring outlives the sink: both belong to the run's wiring).
class RingSink final : public TaskSink {
 public:
  explicit RingSink(RmaRing& ring) : ring_(ring) {}
  bool tryPush(const Task&, std::span<const std::byte> record) override { return ring_.tryPush(record); }

 private:
  RmaRing& ring_;
};

// A ring whose holder can be lost or give tasks back (a spawned pool, a server pool): each task
// it takes is leased to `holder` until its result returns.
class LeasedRingSink final : public TaskSink {
 public:
  LeasedRingSink(RmaRing& ring, TaskLeases& leases, int holder) : ring_(ring), leases_(leases), holder_(holder) {}
  bool tryPush(const Task& task, std::span<const std::byte> record) override {
    if (!ring_.tryPush(record)) return false;
    leases_.lease(holder_, task);
    return true;
  }

 private:
  RmaRing& ring_;
  TaskLeases& leases_;
  int holder_;
};

}  // namespace astraflow::dataflow_detail
