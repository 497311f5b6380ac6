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
#include <numeric>
#include <vector>

namespace astraflow::dataflow_detail {

class TaskDealer {
 public:
  struct Place {
    const void* key;       // stable identity of the place (its sink)
    std::uint64_t weight;  // rollout ranks behind it (0: offered only when the others refuse)
  };

  // The places for the deals that follow (once per flush of the outbox): a place still listed
  // keeps its credit, one no longer listed is forgotten, a new one starts at zero.
  void setPlaces(const std::vector<Place>& places) {
    std::vector<std::int64_t> credit(places.size(), 0);
    for (std::size_t i = 0; i < places.size(); ++i) {
      for (std::size_t j = 0; j < places_.size(); ++j) {
        if (places_[j].key == places[i].key) credit[i] = credit_[j];
      }
    }
    places_ = places;
    credit_ = std::move(credit);
    total_ = 0;
    for (const auto& p : places_) total_ += static_cast<std::int64_t>(p.weight);
    order_.resize(places_.size());
  }

  // The order in which to offer the next task (indices into the places), most credit first.
  const std::vector<std::size_t>& order() {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return next(a) > next(b); });
    return order_;
  }

  // Place `taken` took the task: the credits move on.
  void took(std::size_t taken) {
    for (std::size_t i = 0; i < places_.size(); ++i) credit_[i] += static_cast<std::int64_t>(places_[i].weight);
    credit_[taken] -= total_;
    // A place that kept refusing (a full ring, a site out of credit) would bank credit without
    // bound and, once it frees up, take a burst of tasks: one round's worth is its limit.
    for (auto& c : credit_) c = std::clamp(c, -total_, total_);
  }

 private:
  std::int64_t next(std::size_t i) const { return credit_[i] + static_cast<std::int64_t>(places_[i].weight); }

  std::vector<Place> places_;
  std::vector<std::int64_t> credit_;  // per place, aligned with places_
  std::int64_t total_ = 0;            // the places' weights, summed
  std::vector<std::size_t> order_;    // reused: no allocation per task
};

}  // namespace astraflow::dataflow_detail
