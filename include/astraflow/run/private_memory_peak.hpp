#pragma once
// A rank's peak *private* resident memory, sampled while it runs. The kernel's own peak (VmHWM)
// counts every shared page the rank has touched: the weight store's windows it reads and the
// node's weight copy (docs/weights.md) appear in every rank that reads them, so per-rank VmHWM
// overstates what a rank adds to its node. RssAnon (anonymous pages: the heap, LibTorch's
// tensors) leaves shared-memory windows out, but the kernel keeps no peak of it, so a thread
// samples it. docs/memory.md compares it with each rank's plan less its node-shared items.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace astraflow {

std::uint64_t currentPrivateBytes();  // this process's RssAnon now

class PrivateMemoryPeak {
 public:
  // Samples every `every` from construction until destruction (the thread sleeps between).
  // A transient shorter than `every` may be missed: the peak is a lower bound.
  explicit PrivateMemoryPeak(std::chrono::milliseconds every = std::chrono::milliseconds(50));
  ~PrivateMemoryPeak();
  PrivateMemoryPeak(const PrivateMemoryPeak&) = delete;
  PrivateMemoryPeak& operator=(const PrivateMemoryPeak&) = delete;

  std::uint64_t peakBytes() const;  // the largest sample so far, this moment's included

 private:
  void sample();

  const std::chrono::milliseconds every_;
  mutable std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  mutable std::uint64_t peak_ = 0;
  std::thread thread_;
};

}  // namespace astraflow
