#pragma once
// One environment server for the rollout ranks of a node (environment.openenv.server_per: node,
// openenv_server.cpp). The ranks of one host meet in a node-local folder,
// ${TMPDIR:-/tmp}/astraflow-<uid>/<name>-<hash of the key>, through flock(2) locks — which the
// kernel drops when a process dies, so a crashed rank never leaves one held:
//   start.lock  exclusive while a rank looks for the node's server or starts one;
//   server      "<url> <generation>" of the server now serving, written by rename;
//   users.lock  shared by every rank that uses the server; the rank that started it takes it
//               exclusive before stopping it, so it waits until the node's other ranks are done.
// Private to src/tasks.
#include <chrono>
#include <optional>
#include <string>

#include "astraflow/tasks/process_runner.hpp"

namespace astraflow::detail {

class NodeShare {
 public:
  // Makes (or finds) the folder for `key`; throws Error naming it when it cannot be made.
  NodeShare(const std::string& name, const std::string& key);

  struct Published {
    std::string url;
    int generation = 0;  // 0 for the node's first server, +1 at each start after it
  };

  // Held while a rank reads, starts or publishes the node's server.
  class StartLock {
   public:
    explicit StartLock(int fd);
    ~StartLock();
    StartLock(const StartLock&) = delete;
    StartLock& operator=(const StartLock&) = delete;

   private:
    int fd_;
  };
  [[nodiscard]] StartLock lockStart();

  std::optional<Published> published() const;  // nothing before the first publish or after withdraw()
  void publish(const Published& server);
  void withdraw();  // the server is stopping: no rank adopts it any more
  // Counts this process among the server's users (once; until the process ends).
  void joinUsers();
  // The starter, before stopping its server: true once no other process uses it, false when
  // some still did after `wait`.
  bool othersDone(std::chrono::milliseconds wait);
  const std::string& folder() const { return folder_; }

 private:
  std::string folder_;
  UniqueFd start_fd_, users_fd_;
  bool joined_ = false;
};

}  // namespace astraflow::detail
