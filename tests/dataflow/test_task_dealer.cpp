// TaskDealer (src/dataflow/task_dealer.hpp): tasks dealt over places in proportion to the
// rollout ranks behind each, the way the dataflow rank feeds its pools, spawned pools and sites.
#include <gtest/gtest.h>

#include <vector>

#include "dataflow/task_dealer.hpp"

namespace astraflow::dataflow_detail {
namespace {

// Deals `tasks` over `places`; `accepts(i)` says whether place i has room. Returns per-place counts.
template <class Accepts>
std::vector<int> deal(TaskDealer& dealer, const std::vector<TaskDealer::Place>& places, int tasks, Accepts accepts) {
  std::vector<int> got(places.size(), 0);
  dealer.setPlaces(places);
  for (int t = 0; t < tasks; ++t) {
    for (const auto k : dealer.order()) {
      if (!accepts(k)) continue;
      dealer.took(k);
      ++got[k];
      break;
    }
  }
  return got;
}

TEST(TaskDealer, SharesFollowTheRanksBehindEachPlace) {
  // The autoscaling run's pools: the layout's 8 ranks and spawned pools of 3, 6 and 3. Dealt
  // per place, each would get a quarter (500); by ranks, 8/20 of the tasks go to the first.
  int keys[4];
  const std::vector<TaskDealer::Place> places = {{&keys[0], 8}, {&keys[1], 3}, {&keys[2], 6}, {&keys[3], 3}};
  TaskDealer dealer;
  EXPECT_EQ(deal(dealer, places, 2000, [](std::size_t) { return true; }), (std::vector<int>{800, 300, 600, 300}));
  // Smooth: within any 20 consecutive tasks each place gets exactly its weight.
  const auto window = deal(dealer, places, 20, [](std::size_t) { return true; });
  EXPECT_EQ(window, (std::vector<int>{8, 3, 6, 3}));
}

TEST(TaskDealer, AFullPlaceIsSkippedAndPlacesComeAndGo) {
  int keys[3];
  std::vector<TaskDealer::Place> places = {{&keys[0], 2}, {&keys[1], 2}};
  TaskDealer dealer;
  // The second is full: every task goes to the first, none is lost.
  EXPECT_EQ(deal(dealer, places, 10, [](std::size_t k) { return k == 0; }), (std::vector<int>{10, 0}));
  // A place that joins gets its share from then on (the others keep theirs).
  places.push_back({&keys[2], 4});
  const auto got = deal(dealer, places, 800, [](std::size_t) { return true; });
  EXPECT_NEAR(got[2], 400, 10);
  EXPECT_NEAR(got[0] + got[1], 400, 10);
  // A place with no ranks (all lost) is offered a task only when every other refuses.
  TaskDealer fresh;
  const std::vector<TaskDealer::Place> lost = {{&keys[0], 0}, {&keys[1], 1}};
  EXPECT_EQ(deal(fresh, lost, 5, [](std::size_t) { return true; }), (std::vector<int>{0, 5}));
  EXPECT_EQ(deal(fresh, lost, 3, [](std::size_t k) { return k == 0; }), (std::vector<int>{3, 0}));
}

}  // namespace
}  // namespace astraflow::dataflow_detail
