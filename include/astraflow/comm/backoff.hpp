#pragma once
// Bounded exponential backoff for waits on remote state. Oversubscribed ranks must give the
// core away while they wait: a few yields, then sleeps that double up to a cap.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace astraflow {

class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(1000), std::uint32_t yields = 4)
      : max_sleep_us_(static_cast<std::uint32_t>(max_sleep.count())), yields_(yields) {}
  void wait();  // one step: yield, or sleep 2^n µs up to the cap
  void reset() { attempt_ = 0; }
  // A polling loop's turn: back to yielding after a turn that did something, else one step more.
  void after(bool did) {
    if (did) {
      reset();
    } else {
      wait();
    }
  }
  std::uint32_t attempts() const { return attempt_; }

 private:
  std::uint32_t attempt_ = 0;
  std::uint32_t max_sleep_us_;
  std::uint32_t yields_;  // steps that only yield the core before sleeps begin
};

// Paces the polls of a queue in another rank's window while they keep coming back empty: the
// next poll is due after a pause that doubles from `first` up to `cap`, and at once after a poll
// that found something. What many ranks polling one host cost its node is their poll rate, not
// the work they find: each poll is a wake-up and, on Open MPI's osc sm, atomics under the
// window's spin lock, which 130 simulated ranks on 2 cores spent most of their CPU spinning on.
class PollPacer {
 public:
  using Clock = std::chrono::steady_clock;
  PollPacer(std::chrono::microseconds first, std::chrono::microseconds cap) : first_(first), cap_(cap) {}
  bool due() const { return Clock::now() >= next_; }
  void found() {
    pause_ = std::chrono::microseconds(0);
    next_ = Clock::time_point{};
  }
  void empty() {
    pause_ = pause_.count() == 0 ? first_ : std::min(2 * pause_, cap_);
    next_ = Clock::now() + pause_;
  }
  void sleepUntilDue() const { std::this_thread::sleep_until(next_); }  // at once when due
  std::chrono::microseconds pause() const { return pause_; }            // the pause now (0 after a find)

 private:
  std::chrono::microseconds first_, cap_, pause_{0};
  Clock::time_point next_{};
};

}  // namespace astraflow
