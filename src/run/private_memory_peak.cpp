// The sampled private-memory peak (include/astraflow/run/private_memory_peak.hpp).
#include "astraflow/run/private_memory_peak.hpp"

#include <algorithm>
#include <fstream>
#include <string>

namespace astraflow {

std::uint64_t currentPrivateBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  constexpr std::string_view key = "RssAnon:";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size())) * 1024;  // kB
  }
  return 0;
}

PrivateMemoryPeak::PrivateMemoryPeak(std::chrono::milliseconds every) : every_(every) {
  sample();
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    while (!stop_cv_.wait_for(lock, every_, [this] { return stop_; })) {
      lock.unlock();
      sample();
      lock.lock();
    }
  });
}

PrivateMemoryPeak::~PrivateMemoryPeak() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_one();
  thread_.join();
}

void PrivateMemoryPeak::sample() {
  const std::uint64_t now = currentPrivateBytes();  // read outside the lock: a /proc read
  std::lock_guard lock(mutex_);
  peak_ = std::max(peak_, now);
}

std::uint64_t PrivateMemoryPeak::peakBytes() const {
  const std::uint64_t now = currentPrivateBytes();
  std::lock_guard lock(mutex_);
  peak_ = std::max(peak_, now);
  return peak_;
}

}  // namespace astraflow
