#pragma once
// The OpenEnv server behind a rank's `openenv` episodes (env_openenv.cpp): a running one at
// environment.openenv.url, or one started from environment.openenv.command on a port picked for
// it, health-checked (GET /health) before the first episode and started again when it has died —
// by this rank (server_per: rank), or by the first rank of the node to need it and shared by the
// node's others (server_per: node, node_share.hpp). One per process and options (episodes are
// made per task; the server stays).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "astraflow/core/environment_options.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "tasks/node_share.hpp"
#include "tasks/server_process.hpp"

namespace astraflow::detail {

class OpenEnvServer {
 public:
  // Starts the server (command) and waits for /health, or checks the running one's /health.
  // Throws Error naming environment.openenv and, for a started server, its log's last lines.
  explicit OpenEnvServer(const OpenEnvOptions& options);
  // A node's server is stopped by the rank that started it once the node's other ranks are done
  // with it (or after kNodeDrain).
  ~OpenEnvServer();
  static constexpr std::chrono::seconds kNodeDrain{300};
  OpenEnvServer(const OpenEnvServer&) = delete;
  OpenEnvServer& operator=(const OpenEnvServer&) = delete;

  // Where each episode opens its session (ws://host:port/ws), and which start of the server it
  // reaches (0, then 1 after a restart, …).
  struct Endpoint {
    std::string url;
    int generation = 0;
  };
  Endpoint sessionEndpoint() const;
  // After a session on start `generation` failed: a server this rank started that has ended (or
  // ends within `grace`: a connection the server dropped) is started again and waited for; a
  // node's server another rank started that no longer answers /health is replaced by the one the
  // node has now, or one this rank starts. True when the endpoint changed; false when the server
  // is alive, a url server, would not start, or was replaced already.
  bool reviveIfDead(int generation, std::chrono::milliseconds grace);

  // An MCP-style server's tool list (interface: mcp; ListToolsObservation's "tools" as JSON text),
  // asked once per process: empty until an episode has listed them.
  std::string listedTools() const;
  void rememberTools(std::string tools_json);

  // Figures the episodes add to; read by sharedOpenEnvCounters().
  struct Counters {
    std::atomic<std::uint64_t> sessions{0}, steps{0}, errors{0}, timeouts{0}, malformed{0}, restarts{0};
  };
  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }

 private:
  void start();         // a fresh process on a fresh port; throws Error
  void startRetried();  // start(), and once more on another port when that fails
  // server_per: node — the node's server when it answers, else one this rank starts and
  // publishes. True when this rank started it.
  bool adoptOrStart();
  void waitHealthy();           // throws Error past start_seconds or when the process ends
  std::string logNote() const;  // "; its log (<path>) ends: …" for a started server

  OpenEnvOptions options_;
  mutable std::mutex mutex_;
  std::unique_ptr<ServerProcess> process_;
  std::unique_ptr<NodeShare> node_;  // server_per: node
  std::string base_url_;             // http://host:port
  int starts_ = 0;                   // by this object
  int generation_ = 0;               // of the server base_url_ reaches (node-wide with server_per: node)
  std::string tools_json_;           // listedTools()
  Counters counters_;
};

// The process's server for these options.
std::shared_ptr<OpenEnvServer> sharedOpenEnvServer(const OpenEnvOptions& options);

}  // namespace astraflow::detail
