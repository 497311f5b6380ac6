#pragma once
// Bounded exponential backoff for waits on remote state. Oversubscribed ranks must give the
// core away while they wait: a few yields, then sleeps that double up to a cap.
#include <chrono>
#include <cstdint>

namespace astraflow {

class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(1000), std::uint32_t yields = 4)
      : max_sleep_us_(static_cast<std::uint32_t>(max_sleep.count())), yields_(yields) {}
  void wait();  // one step: yield, or sleep 2^n µs up to the cap
  void reset() { attempt_ = 0; }
  std::uint32_t attempts() const { return attempt_; }

 private:
  std::uint32_t attempt_ = 0;
  std::uint32_t max_sleep_us_;
  std::uint32_t yields_;  // steps that only yield the core before sleeps begin
};

}  // namespace astraflow
