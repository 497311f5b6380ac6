#pragma once
// One object per key for the whole process, made on first use: a rank's environments are made
// per episode, while the processes and connections behind them (reward workers, reward
// connections, MCP servers) stay for the rank's life. A construction that throws registers
// nothing, so a later use tries again and the counters never meet an empty entry.
#include <map>
#include <memory>
#include <mutex>

namespace astraflow::detail {

template <class Key, class T>
class ProcessRegistry {
 public:
  template <class Make>
  std::shared_ptr<T> get(const Key& key, Make&& make) {
    std::lock_guard lock(mutex_);
    if (const auto it = items_.find(key); it != items_.end()) return it->second;
    std::shared_ptr<T> made = make();  // may throw
    items_.emplace(key, made);
    return made;
  }
  template <class Visit>
  void forEach(Visit&& visit) const {
    std::lock_guard lock(mutex_);
    for (const auto& [key, item] : items_) visit(*item);
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<T>> items_;
};

}  // namespace astraflow::detail
