// BatchAssembler: one policy's trajectories grouped by GRPO group, filtered, held in a FIFO ready pool and served as
// trainer batches within the staleness bound, with the counters the conservation check adds up.
#include "astraflow/dataflow/batch_assembler.hpp"

#include <algorithm>
#include <cmath>

namespace astraflow {

BatchAssembler::BatchAssembler(std::string policy, int group_size, int groups_per_step, int max_staleness,
                               std::vector<std::unique_ptr<Filter>> filters, std::unique_ptr<Sampler> sampler,
                               std::uint64_t seed)
    : policy_(std::move(policy)),
      group_size_(group_size),
      groups_per_step_(groups_per_step),
      max_staleness_(max_staleness),
      filters_(std::move(filters)),
      sampler_(sampler ? std::move(sampler) : makeSampler(PluginSpec{"fresh", {}, "dataflow.sampler"})),
      rng_(seed) {}

void BatchAssembler::ingest(Trajectory trajectory) {
  ++counters_.produced;
  const std::uint64_t group_id = trajectory.group_id;
  const auto arrived = ++arrived_[group_id];
  const bool nonfinite = trajectory.status == static_cast<std::uint8_t>(TrajectoryStatus::Nonfinite) ||
                         trajectory.rewards.empty() || !std::isfinite(trajectory.rewards[0]);
  const bool error = trajectory.status == static_cast<std::uint8_t>(TrajectoryStatus::Error);
  auto& members = incomplete_[group_id];
  if (error || nonfinite) {
    ++counters_.filtered;
    ++(error ? counters_.filtered_error : counters_.filtered_nonfinite);
    if (entry_observer_) entry_observer_(trajectory, false);
  } else {
    members.push_back(std::move(trajectory));
    ++incomplete_count_;
  }
  if (arrived >= static_cast<std::uint32_t>(group_size_)) {
    auto held = std::move(members);
    incomplete_.erase(group_id);
    arrived_.erase(group_id);
    incomplete_count_ -= held.size();
    completeGroup(group_id, std::move(held), arrived);
  }
}

void BatchAssembler::completeGroup(std::uint64_t, std::vector<Trajectory> members, std::uint32_t arrived) {
  if (members.empty()) return;  // every member was filtered
  Group g;
  g.oldest_version = members.front().weight_version_min;
  for (const auto& t : members) g.oldest_version = std::min(g.oldest_version, t.weight_version_min);
  g.members = std::move(members);
  if (arrived > 0 && observer_) {  // a restored group (arrived = 0) was observed before
    std::vector<double> rewards;
    for (const auto& t : g.members) rewards.push_back(t.rewards[0]);
    observer_(g.members.front().problem_id, rewards);
  }
  if (arrived > 0) {
    for (auto& f : filters_) {
      bool keep = true;
      try {
        keep = f->keep(g);
      } catch (const std::exception&) {
        // A failing plug-in never costs data: the group is kept and the error counted.
        ++f->counters().errors;
      }
      if (!keep) {
        ++f->counters().dropped;
        counters_.filtered += g.members.size();
        if (entry_observer_) {
          for (const auto& t : g.members) entry_observer_(t, false);
        }
        return;
      }
      ++f->counters().kept;
    }
  }
  if (arrived > 0 && entry_observer_) {
    for (const auto& t : g.members) entry_observer_(t, true);
  }
  ready_count_ += g.members.size();
  ready_.push_back(std::move(g));
}

std::optional<Batch> BatchAssembler::serve(std::int64_t version, std::uint64_t batch_id) {
  // Staleness only grows with the version, so a group too old now never becomes usable: drop it.
  for (auto it = ready_.begin(); it != ready_.end();) {
    if (version - it->oldest_version > max_staleness_) {
      counters_.stale_dropped += it->members.size();
      ready_count_ -= it->members.size();
      it = ready_.erase(it);
    } else {
      ++it;
    }
  }
  const std::uint64_t replayed_before = sampler_->counters().replayed;
  const std::uint64_t ready_before = ready_count_;
  std::vector<Group> groups;
  bool filled = false;
  try {
    filled = sampler_->take(ready_, static_cast<std::size_t>(groups_per_step_), version, rng_, groups);
  } catch (const std::exception&) {
    ++sampler_->counters().errors;  // the ready pool is left as the sampler left it
    filled = false;
  }
  // Recount what is left: a sampler only moves groups out of the pool.
  std::uint64_t left = 0;
  for (const auto& g : ready_) left += g.members.size();
  ready_count_ = left;
  if (!filled) {
    for (auto& g : groups) {  // a throwing sampler may have taken some: put them back
      ready_count_ += g.members.size();
      ready_.push_front(std::move(g));
    }
    return std::nullopt;
  }
  Batch batch;
  batch.batch_id = batch_id;
  batch.policy = policy_;
  batch.trainer_version = version;
  // What the trainer checks each trajectory against (servedStalenessBound of the config).
  batch.max_staleness = std::max<std::int64_t>(max_staleness_, sampler_->maxStaleness());
  for (auto& g : groups) {
    for (auto& t : g.members) batch.trajectories.push_back(std::move(t));
  }
  counters_.consumed += ready_before - ready_count_;
  counters_.replayed += sampler_->counters().replayed - replayed_before;
  ++counters_.batches;
  return batch;
}

void BatchAssembler::restore(const AssemblerCounters& counters, std::vector<Trajectory> held) {
  incomplete_.clear();
  arrived_.clear();
  ready_.clear();
  incomplete_count_ = ready_count_ = 0;
  counters_ = counters;
  std::map<std::uint64_t, std::vector<Trajectory>> groups;
  std::vector<std::uint64_t> order;
  for (auto& t : held) {
    auto& members = groups[t.group_id];
    if (members.empty()) order.push_back(t.group_id);
    members.push_back(std::move(t));
  }
  for (auto id : order) completeGroup(id, std::move(groups[id]), 0);
}

std::int64_t BatchAssembler::admissionRoom(std::int64_t version, std::int64_t in_flight) const {
  const std::int64_t b = batchTrajectories();
  // Only the fresh share f of each batch consumes new data (a replay sampler fills the rest), so
  // the rule runs on f·B: with plain B, producers would run ahead and their data age past η.
  const double fresh_batch = sampler_->freshFraction() * static_cast<double>(b);
  const auto room =
      static_cast<std::int64_t>(std::floor(static_cast<double>(max_staleness_ + version + 1) * fresh_batch)) -
      static_cast<std::int64_t>(counters_.consumed) - in_flight - static_cast<std::int64_t>(buffered());
  return std::max<std::int64_t>(room, 0);
}

std::uint64_t BatchAssembler::buffered() const { return incomplete_count_ + ready_count_; }

std::vector<Trajectory> BatchAssembler::heldTrajectories() const {
  std::vector<Trajectory> out;
  for (const auto& [id, members] : incomplete_) out.insert(out.end(), members.begin(), members.end());
  for (const auto& g : ready_) out.insert(out.end(), g.members.begin(), g.members.end());
  return out;
}

}  // namespace astraflow
