#pragma once
// When a buffering writer (trace events, trajectories) appends by time as well as by count: a
// slow run — a real-size model, a step a minute — may never fill a count-sized buffer before it
// is killed, and its files would hold nothing (run.flush_seconds).
#include <chrono>

namespace astraflow::io {

class FlushClock {
 public:
  // seconds <= 0: by count only.
  explicit FlushClock(double seconds = 0) : seconds_(seconds) {}
  // Whether `seconds` have passed since the last flush (checked when a record arrives).
  bool due() const { return seconds_ > 0 && std::chrono::duration<double>(Clock::now() - last_).count() >= seconds_; }
  void flushed() { last_ = Clock::now(); }
  double seconds() const { return seconds_; }

 private:
  using Clock = std::chrono::steady_clock;
  double seconds_;
  Clock::time_point last_ = Clock::now();
};

}  // namespace astraflow::io
