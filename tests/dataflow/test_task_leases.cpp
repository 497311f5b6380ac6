// TaskLeases, the elastic pools' book of leased tasks: a lost holder gives back exactly what it
// still held, in lease order; results release leases; a re-issued task's first result per role
// counts and a late one from the lost holder is dropped as a duplicate; nothing else is.
#include <gtest/gtest.h>

#include "dataflow/task_leases.hpp"

namespace astraflow::dataflow_detail {
namespace {

Task task(std::uint64_t id) {
  Task t;
  t.task_id = id;
  t.policy = "solver";
  return t;
}

std::vector<std::uint64_t> ids(const std::vector<Task>& tasks) {
  std::vector<std::uint64_t> out;
  for (const auto& t : tasks) out.push_back(t.task_id);
  return out;
}

TEST(TaskLeases, ALostHolderGivesBackWhatItStillHeldInLeaseOrder) {
  TaskLeases book;
  for (std::uint64_t id : {9, 3, 7, 5}) book.lease(0, task(id));
  book.lease(1, task(4));
  EXPECT_EQ(book.held(0), 4u);
  EXPECT_EQ(book.held(1), 1u);
  EXPECT_TRUE(book.returned(3, ""));  // answered: no longer held
  EXPECT_EQ(book.held(0), 3u);
  EXPECT_EQ(ids(book.lose(0)), (std::vector<std::uint64_t>{9, 7, 5}));
  EXPECT_EQ(book.held(0), 0u);
  EXPECT_EQ(book.held(1), 1u);  // another holder's lease is untouched
  EXPECT_EQ(book.reissued(), 3u);
  EXPECT_TRUE(book.lose(0).empty());  // nothing twice
}

TEST(TaskLeases, TheFirstResultOfAReissuedTaskCountsALateOneIsADuplicate) {
  TaskLeases book;
  book.lease(0, task(1));
  book.lease(0, task(2));
  ASSERT_EQ(book.lose(0).size(), 2u);
  book.lease(1, task(1));             // re-issued to another holder
  EXPECT_TRUE(book.returned(1, ""));  // its result: counts, releases holder 1's lease
  EXPECT_EQ(book.held(1), 0u);
  EXPECT_FALSE(book.returned(1, ""));  // the lost holder's late result: dropped
  EXPECT_TRUE(book.returned(2, ""));   // the lost holder's result arrives first: counts
  EXPECT_FALSE(book.returned(2, ""));  // the re-run's result is then the duplicate
  EXPECT_EQ(book.duplicates(), 2u);
  EXPECT_TRUE(book.returned(77, ""));  // a task that was never leased is never a duplicate
  EXPECT_TRUE(book.returned(77, ""));
  EXPECT_EQ(book.duplicates(), 2u);
}

TEST(TaskLeases, ATeamTaskCountsOneResultPerRole) {
  TaskLeases book;
  book.lease(0, task(5));
  ASSERT_EQ(book.lose(0).size(), 1u);
  EXPECT_TRUE(book.returned(5, "solver"));
  EXPECT_TRUE(book.returned(5, "verifier"));
  EXPECT_FALSE(book.returned(5, "solver"));
  EXPECT_FALSE(book.returned(5, "verifier"));
  EXPECT_EQ(book.duplicates(), 2u);
}

TEST(TaskLeases, LeasingATaskAgainMovesItToTheNewHolder) {
  TaskLeases book;
  book.lease(0, task(8));
  book.lease(2, task(8));
  EXPECT_EQ(book.held(0), 0u);
  EXPECT_EQ(book.held(2), 1u);
  EXPECT_TRUE(book.lose(0).empty());
  EXPECT_EQ(ids(book.lose(2)), std::vector<std::uint64_t>{8});
}

}  // namespace
}  // namespace astraflow::dataflow_detail
