#pragma once
// The clock of the single-process micro-benchmarks: best-of-N wall seconds of one call.
#include <algorithm>
#include <chrono>

namespace astraflow::bench {

inline double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of `reps` runs of fn (seconds): the least disturbed run on a shared machine.
template <class Fn>
double best(int reps, Fn&& fn) {
  double b = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t = seconds();
    fn();
    b = std::min(b, seconds() - t);
  }
  return b;
}

}  // namespace astraflow::bench
