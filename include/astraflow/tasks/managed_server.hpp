#pragma once
// A server process a rank starts and keeps (docs/architecture.md §11, `tasks`): an OpenEnv
// environment server (environment.openenv.command) or an inference server a rollout pool launches
// (layout[i].backend.launch). Started on a free port it picks, health-checked until it answers,
// started again when it has died, stopped when its owner goes — one per rank, or one per node
// shared by the node's ranks (they meet through flock(2) locks in a node-local folder,
// src/tasks/node_share.hpp: the node's first rank to need it starts it, a dead one is started
// again once for the node, and its starter stops it once the node's other ranks are done).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace astraflow {

struct ManagedServerOptions {
  std::string config_key;  // what messages name: "environment.openenv", "layout[2].backend.launch"
  std::string name;        // the logs' and the node folder's prefix: "openenv", "vllm"
  std::string identity;    // ranks of a node whose servers have the same identity share one (per_node)
  // The program and its arguments for a start on `port`, asked at each start: a server started
  // again may start from another folder (an inference server's newest version).
  std::function<std::vector<std::string>(int port)> command;
  std::vector<std::pair<std::string, std::string>> env;  // added to the host's environment
  std::string log_dir;                                   // <name>-<host>-<pid>-<n>.log per start
  bool per_node = false;
  double start_seconds = 120;  // its health path must answer within it
  std::string health_path = "/health";
  int max_restarts = -1;  // deaths it is started again after; past them it is given up (-1: no limit)
};

class ManagedServer {
 public:
  // Starts the server (or adopts the node's) and waits until it answers. Throws Error naming
  // `config_key` and, for a server it started, the last lines of its log.
  explicit ManagedServer(ManagedServerOptions options);
  // A server this rank started is stopped (its process group killed); a node's, once the node's
  // other ranks are done with it (or after kNodeDrain).
  ~ManagedServer();
  static constexpr std::chrono::seconds kNodeDrain{300};
  ManagedServer(const ManagedServer&) = delete;
  ManagedServer& operator=(const ManagedServer&) = delete;

  // http://127.0.0.1:<port>, and which start of the server it reaches (0, then 1 after a
  // restart, …; node-wide with per_node).
  struct Endpoint {
    std::string url;
    int generation = 0;
  };
  Endpoint endpoint() const;
  // After a call to start `generation` failed: a server this rank started that has ended (or
  // ends within `grace`: a connection it dropped as it died) is started again and waited for; a
  // node's server another rank started that no longer answers is replaced by the one the node has
  // now, or one this rank starts. True when the endpoint changed; false when the server is alive,
  // was replaced already, or would not start (logged; the next try then waits 5 s, doubling to
  // 60 s).
  bool reviveIfDead(int generation, std::chrono::milliseconds grace);
  // Servers reviveIfDead started again itself (a node's next one another rank started: not counted).
  int restarts() const;
  // It died again after max_restarts restarts: reviveIfDead no longer starts it.
  bool givenUp() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Waits until a server someone else runs answers `health_path` (GET, 2xx) within `seconds`;
// throws Error naming `config_key` and the last answer.
void waitUntilAnswers(const std::string& base_url, const std::string& health_path, double seconds,
                      const std::string& config_key);

}  // namespace astraflow
