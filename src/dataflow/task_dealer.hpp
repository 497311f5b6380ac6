#pragma once
// How the dataflow rank deals a policy's tasks over the places that take them (local pools,
// spawned pools, remote sites): in proportion to the rollout ranks behind each place, so a pool
// of 8 ranks gets 8 times the share of a pool of 1. Dealing per place instead starved the
// layout's pool once spawned pools joined (docs/simulation.md, autoscaling).
//
// Smooth weighted round robin, as nginx balances upstreams: for each task every place's credit
// grows by its weight, places are offered the task in order of credit, and the one that takes
// it pays the total weight. Places come and go; a new one starts with no credit, and credit is
// held within one round's total. Private to src/dataflow.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

namespace astraflow::dataflow_detail {

class TaskDealer {
 public:
  struct Place {
    const void* key;       // stable identity of the place (its sink)
    std::uint64_t weight;  // rollout ranks behind it (0: offered only when the others refuse)
  };

  // The order in which to offer the next task (indices into `places`), most credit first.
  // Forgets places that are no longer listed.
  std::vector<std::size_t> order(const std::vector<Place>& places) {
    std::map<const void*, std::int64_t> kept;
    for (const auto& p : places) kept[p.key] = credit(p.key);
    credit_ = std::move(kept);
    std::vector<std::size_t> idx(places.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return next(places[a]) > next(places[b]); });
    return idx;
  }

  // Place `taken` (an index into the same `places`) took the task: the credits move on.
  void took(const std::vector<Place>& places, std::size_t taken) {
    std::int64_t total = 0;
    for (const auto& p : places) {
      credit_[p.key] += static_cast<std::int64_t>(p.weight);
      total += static_cast<std::int64_t>(p.weight);
    }
    credit_[places[taken].key] -= total;
    // A place that kept refusing (a full ring, a site out of credit) would bank credit without
    // bound and, once it frees up, take a burst of tasks: one round's worth is its limit.
    for (auto& [key, c] : credit_) c = std::clamp(c, -total, total);
  }

 private:
  std::int64_t credit(const void* key) const {
    const auto it = credit_.find(key);
    return it == credit_.end() ? 0 : it->second;
  }
  std::int64_t next(const Place& p) const { return credit(p.key) + static_cast<std::int64_t>(p.weight); }

  std::map<const void*, std::int64_t> credit_;
};

}  // namespace astraflow::dataflow_detail
