// The process-wide spawner thread (spawner_thread.hpp).
#include "tasks/spawner_thread.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <thread>

namespace astraflow::detail {
namespace {

class SpawnerThread {
 public:
  SpawnerThread() {
    std::thread([this] { loop(); }).detach();
  }

  void run(const std::function<void()>& start) {
    std::packaged_task<void()> job([&start] { start(); });
    std::future<void> done = job.get_future();
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
    done.get();  // rethrows what `start` threw
  }

 private:
  [[noreturn]] void loop() {
    for (;;) {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return !jobs_.empty(); });
      std::packaged_task<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> jobs_;
};

}  // namespace

void runOnSpawnerThread(const std::function<void()>& start) {
  // Leaked on purpose: the detached thread waits on its members until the process ends, so they
  // must never be destroyed by static destruction.
  static SpawnerThread* const spawner = new SpawnerThread();
  spawner->run(start);
}

}  // namespace astraflow::detail
