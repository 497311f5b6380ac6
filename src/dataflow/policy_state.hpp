#pragma once
// What the dataflow rank keeps per policy (its assembler, pools, versions, outbox, in-flight
// count), and the units policies are admitted in. Private to src/dataflow.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/core/records.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "dataflow/task_dealer.hpp"

namespace astraflow::dataflow_detail {

struct PolicyState {
  std::string name;
  int group = 0;  // index in trainerGroups()
  std::unique_ptr<BatchAssembler> assembler;
  std::vector<int> pools;         // pools serving the policy
  TaskDealer dealer;              // deals its tasks over the places that take them, by their ranks
  std::int64_t published = -1;    // newest published version
  std::int64_t next_batch = 0;    // batch i is built for trainer version i
  std::int64_t target = 0;        // last version of the run (run.versions, or where a wall-time stop fell)
  std::deque<Batch> unconfirmed;  // served, not yet trained (id >= published)
  std::optional<std::vector<std::byte>> pending_batch;  // encoded, waiting for ring space
  std::int64_t in_flight = 0;                           // training tasks admitted, trajectories not yet received
  std::deque<Task> outbox;                              // admitted tasks waiting for task-ring space
  // Progress between two progress lines.
  double reward_sum = 0;
  std::uint64_t reward_count = 0;
  std::vector<double> served_at, published_at;  // per version (dataflow-side wait estimate)
  std::vector<TrainerClock> trainer_clock;      // per version: the trainer's cumulative wait/step when staged
};

// Policies admitted together: tasks go through the carrier's outbox and pools, and each task
// yields one trajectory for every member. Alone, a policy is its own unit; a multi-agent team
// is one unit carried by its first role's policy.
struct AdmissionUnit {
  std::size_t carrier = 0;
  std::vector<std::size_t> members;
};

}  // namespace astraflow::dataflow_detail
