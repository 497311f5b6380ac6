#pragma once
// The OpenEnv server behind a rank's `openenv` episodes (env_openenv.cpp): a running one at
// environment.openenv.url, or one started from environment.openenv.command on a port picked for
// it, health-checked (GET /health) before the first episode and started again when it has died —
// by this rank (server_per: rank), or by the first rank of the node to need it and shared by the
// node's others (server_per: node): a ManagedServer (astraflow/tasks/managed_server.hpp). One per process and options
// (episodes are made per task; the server stays).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "astraflow/core/environment_options.hpp"
#include "astraflow/tasks/managed_server.hpp"
#include "astraflow/tasks/openenv.hpp"

namespace astraflow::detail {

class OpenEnvServer {
 public:
  // Starts the server (command; ManagedServer) and waits for /health, or checks the running
  // one's /health. Throws Error naming environment.openenv and, for a started server, its log's
  // last lines.
  explicit OpenEnvServer(const OpenEnvOptions& options);
  OpenEnvServer(const OpenEnvServer&) = delete;
  OpenEnvServer& operator=(const OpenEnvServer&) = delete;

  // Where each episode opens its session (ws://host:port/ws), and which start of the server it
  // reaches (0, then 1 after a restart, …).
  struct Endpoint {
    std::string url;
    int generation = 0;
  };
  Endpoint sessionEndpoint() const;
  // After a session on start `generation` failed: ManagedServer::reviveIfDead (a url server is
  // not ours to start: false).
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
  std::unique_ptr<ManagedServer> server_;  // command; null for a url server
  std::string url_;                        // a url server's http://host:port
  mutable std::mutex mutex_;               // guards tools_json_
  std::string tools_json_;                 // listedTools()
  Counters counters_;
};

// The process's server for these options; null, with the reason in `failure`, while it cannot
// be started (the error is logged once per failed start, naming environment.openenv.command).
std::shared_ptr<OpenEnvServer> sharedOpenEnvServer(const OpenEnvOptions& options, std::string& failure);

}  // namespace astraflow::detail
