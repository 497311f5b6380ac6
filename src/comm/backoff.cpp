// Backoff::wait: one step of the bounded backoff of comm/backoff.hpp: sched_yield for the first steps, then sleeps
// that double from 1 µs up to the cap.
#include "astraflow/comm/backoff.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace astraflow {

void Backoff::wait() {
  if (attempt_ < yields_) {
    sched_yield();
  } else {
    const std::uint32_t shift = std::min<std::uint32_t>(attempt_ - yields_, 20);
    const std::uint32_t us = std::min<std::uint32_t>(1u << shift, max_sleep_us_);
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  ++attempt_;
}

}  // namespace astraflow
