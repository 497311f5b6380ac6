// PollPacer (comm/backoff.hpp): how a rollout rank paces its polls of an empty task ring.
#include <gtest/gtest.h>

#include <chrono>

#include "astraflow/comm/backoff.hpp"

namespace {

using namespace std::chrono_literals;
using astraflow::PollPacer;

TEST(PollPacer, DueAtOnceUntilAPollComesBackEmpty) {
  PollPacer pacer(10s, 40s);
  EXPECT_TRUE(pacer.due());
  pacer.empty();
  EXPECT_FALSE(pacer.due());  // the next poll waits its pause
  pacer.found();
  EXPECT_TRUE(pacer.due());  // something came: ask again at once
}

TEST(PollPacer, PausesDoubleUpToTheCapAndStartOverAfterAFind) {
  PollPacer pacer(1s, 4s);
  std::chrono::microseconds seen[5];
  for (auto& pause : seen) {
    pacer.empty();
    pause = pacer.pause();
  }
  EXPECT_EQ(seen[0], 1s);
  EXPECT_EQ(seen[1], 2s);
  EXPECT_EQ(seen[2], 4s);
  EXPECT_EQ(seen[3], 4s);
  EXPECT_EQ(seen[4], 4s);
  pacer.found();
  pacer.empty();
  EXPECT_EQ(pacer.pause(), 1s);
}

TEST(PollPacer, SleepsUntilTheNextPollIsDue) {
  PollPacer pacer(30ms, 30ms);
  const auto t0 = std::chrono::steady_clock::now();
  pacer.sleepUntilDue();  // due: no sleep
  pacer.empty();
  pacer.sleepUntilDue();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_TRUE(pacer.due());
}

}  // namespace
