#pragma once
// BatchAssembler — the trajectory side of the dataflow layer for one policy (docs/architecture.md §4):
// groups arriving trajectories by GRPO group, filters them, holds complete groups in a FIFO
// ready pool and serves trainer batches that respect the staleness bound η. Pure logic (no MPI,
// no tensors), so every rule here is unit-tested on its own; the dataflow rank's loop drives it.
//
// Counting (docs/runtime-notes.md, "Counters"):
//   produced       trajectories received (evaluation excluded)
//   filtered       refused: non-finite reward or error status (per member), or a filter plug-in
//                  dropped the group (all its members)
//   stale_dropped  groups whose oldest member is older than η for the batch being served
//   consumed       trajectories served in batches
//   buffered       trajectories held now: incomplete groups + the ready pool
//   accepted       produced − filtered − stale_dropped
// Conservation, checked by the end-to-end test: accepted == consumed + buffered.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include <functional>
#include <memory>
#include <random>

#include "astraflow/core/records.hpp"
#include "astraflow/dataflow/plugins.hpp"

namespace astraflow {

struct AssemblerCounters {
  std::uint64_t produced = 0;
  std::uint64_t filtered = 0;
  std::uint64_t filtered_nonfinite = 0;  // of filtered: NaN/inf reward or non-finite generation
  std::uint64_t filtered_error = 0;      // of filtered: error status (e.g. a record too large for the ring)
  std::uint64_t stale_dropped = 0;
  std::uint64_t consumed = 0;  // fresh trajectories served (each at most once)
  std::uint64_t replayed = 0;  // trajectories served again by a replay sampler (not in consumed)
  std::uint64_t batches = 0;
  std::uint64_t accepted() const { return produced - filtered - stale_dropped; }
};

class BatchAssembler {
 public:
  // Without filters every complete group is kept; without a sampler batches are oldest-first.
  BatchAssembler(std::string policy, int group_size, int groups_per_step, int max_staleness,
                 std::vector<std::unique_ptr<Filter>> filters = {}, std::unique_ptr<Sampler> sampler = nullptr,
                 std::uint64_t seed = 1);

  // Called with every complete group's problem and member rewards (curators learn from it).
  // Called for every ingested trajectory once its fate is known: entered the ready pool, or
  // filtered (alone, or with its group). The balance report's per-instance figures.
  void setEntryObserver(std::function<void(const Trajectory&, bool entered)> observer) {
    entry_observer_ = std::move(observer);
  }
  void setGroupObserver(std::function<void(std::uint64_t, const std::vector<double>&)> observer) {
    observer_ = std::move(observer);
  }

  // One arriving trajectory. The group becomes ready once all group_size members arrived.
  void ingest(Trajectory trajectory);

  // A batch for trainer version `version` when enough fresh complete groups are ready, oldest
  // first; groups too stale for `version` are dropped (counted) on the way. staleness_of_batch
  // receives, per served trajectory, version − weight_version_min.
  std::optional<Batch> serve(std::int64_t version, std::uint64_t batch_id);

  // The admission capacity rule (docs/architecture.md §4): trajectories that may be admitted now,
  // given `in_flight` admitted but not yet received, when the trainer is at `version`:
  //   (η + V + 1)·f·B − consumed − in_flight − buffered, floored at 0, where f is the sampler's
  //   fresh fraction (1, or 1 − ratio for replay).
  std::int64_t admissionRoom(std::int64_t version, std::int64_t in_flight) const;

  // Resume: counters and held trajectories from a checkpoint. Every restored group goes to the
  // ready pool, complete or not (its missing members were in flight when the run stopped and
  // will not come back; a smaller group is still a valid GRPO group).
  void restore(const AssemblerCounters& counters, std::vector<Trajectory> held);

  std::uint64_t buffered() const;
  std::size_t readyGroups() const { return ready_.size(); }
  const AssemblerCounters& counters() const { return counters_; }
  AssemblerCounters& counters() { return counters_; }
  const std::string& policy() const { return policy_; }
  int batchTrajectories() const { return group_size_ * groups_per_step_; }
  int maxStaleness() const { return max_staleness_; }
  const std::vector<std::unique_ptr<Filter>>& filters() const { return filters_; }
  Sampler& sampler() { return *sampler_; }

  // Every held trajectory (incomplete groups, then the ready pool): what a checkpoint stores.
  std::vector<Trajectory> heldTrajectories() const;

 private:
  using Group = ReadyGroup;
  void completeGroup(std::uint64_t group_id, std::vector<Trajectory> members, std::uint32_t arrived);

  std::string policy_;
  int group_size_;
  int groups_per_step_;
  int max_staleness_;
  std::map<std::uint64_t, std::vector<Trajectory>> incomplete_;
  std::map<std::uint64_t, std::uint32_t> arrived_;  // members arrived per incomplete group (incl. filtered)
  std::deque<Group> ready_;
  std::uint64_t incomplete_count_ = 0;  // trajectories held in incomplete_
  std::uint64_t ready_count_ = 0;
  AssemblerCounters counters_;
  std::vector<std::unique_ptr<Filter>> filters_;
  std::unique_ptr<Sampler> sampler_;
  std::mt19937_64 rng_;
  std::function<void(std::uint64_t, const std::vector<double>&)> observer_;
  std::function<void(const Trajectory&, bool)> entry_observer_;
};

}  // namespace astraflow
