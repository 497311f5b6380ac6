// OpenEnvServer (openenv_server.hpp): an OpenEnv server reached at a url or started as a ManagedServer.
#include "tasks/openenv_server.hpp"

#include "astraflow/core/placeholders.hpp"
#include "tasks/process_registry.hpp"

namespace astraflow::detail {
namespace {

// The node's folder is per server: the same command, environment and log folder.
std::string serverKey(const OpenEnvOptions& o) {
  std::string key = o.url + '\x1d' + o.log_dir;
  for (const auto& a : o.command) key += '\x1f' + a;
  for (const auto& [k, v] : o.env) key += '\x1e' + k + '=' + v;
  return key;
}

ManagedServerOptions managedOptions(const OpenEnvOptions& o) {
  ManagedServerOptions m;
  m.config_key = "environment.openenv";
  m.name = "openenv";
  m.identity = serverKey(o);
  m.command = [command = o.command](int port) {
    std::vector<std::string> argv;
    for (const std::string& a : command) argv.push_back(withPlaceholder(a, "{port}", std::to_string(port)));
    return argv;
  };
  m.env = o.env;
  m.log_dir = o.log_dir;
  m.per_node = o.server_per == OpenEnvServerScope::Node;
  m.start_seconds = o.start_seconds;
  return m;
}

}  // namespace

OpenEnvServer::OpenEnvServer(const OpenEnvOptions& options) {
  if (!options.command.empty()) {
    server_ = std::make_unique<ManagedServer>(managedOptions(options));
    return;
  }
  url_ = options.url;
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  waitUntilAnswers(url_, "/health", options.start_seconds, "environment.openenv");
}

OpenEnvServer::Endpoint OpenEnvServer::sessionEndpoint() const {
  const ManagedServer::Endpoint e = server_ ? server_->endpoint() : ManagedServer::Endpoint{url_, 0};
  return {"ws://" + e.url.substr(std::string_view("http://").size()) + "/ws", e.generation};
}

bool OpenEnvServer::reviveIfDead(int generation, std::chrono::milliseconds grace) {
  if (!server_ || !server_->reviveIfDead(generation, grace)) return false;
  counters_.restarts = static_cast<std::uint64_t>(server_->restarts());  // starts of its own, not adoptions
  return true;
}

std::string OpenEnvServer::listedTools() const {
  std::lock_guard lock(mutex_);
  return tools_json_;
}

void OpenEnvServer::rememberTools(std::string tools_json) {
  std::lock_guard lock(mutex_);
  tools_json_ = std::move(tools_json);
}

namespace {

ProcessRegistry<std::string, OpenEnvServer>& servers() {
  static ProcessRegistry<std::string, OpenEnvServer> registry;
  return registry;
}

}  // namespace

std::shared_ptr<OpenEnvServer> sharedOpenEnvServer(const OpenEnvOptions& o) {
  return servers().get(serverKey(o), [&] { return std::make_shared<OpenEnvServer>(o); });
}

}  // namespace astraflow::detail

namespace astraflow {

OpenEnvCounters sharedOpenEnvCounters() {
  OpenEnvCounters sum;
  detail::servers().forEach([&](const detail::OpenEnvServer& s) {
    const auto& c = s.counters();
    sum.sessions += c.sessions, sum.steps += c.steps, sum.errors += c.errors;
    sum.timeouts += c.timeouts, sum.malformed += c.malformed, sum.restarts += c.restarts;
  });
  return sum;
}

}  // namespace astraflow
