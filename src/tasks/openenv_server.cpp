// OpenEnvServer (openenv_server.hpp): an OpenEnv server reached at a url or started as a ManagedServer.
#include "tasks/openenv_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "astraflow/core/placeholders.hpp"
#include "astraflow/tasks/process_runner.hpp"
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

namespace {

// A server that would not start, per options: episodes fail at once (env_error) until it is tried
// again — never, when its program cannot run (that does not mend itself: the rank leaves its
// pool, openEnvUnavailable), else 5 s later, doubling to 5 min — so a failed start is tried and
// logged once per rank, not once per episode in flight.
struct StartFailure {
  std::string why;
  bool permanent = false;
  std::chrono::steady_clock::time_point retry_at;
  std::chrono::seconds backoff{0};
};

struct StartFailures {
  std::mutex mutex;  // held across a start: the threads of a rank try it one at a time
  std::map<std::string, StartFailure> by_key;
  std::atomic<std::uint64_t> failed_resets{0};
};

StartFailures& startFailures() {
  static StartFailures failures;
  return failures;
}

}  // namespace

std::shared_ptr<OpenEnvServer> sharedOpenEnvServer(const OpenEnvOptions& o, std::string& failure) {
  auto& f = startFailures();
  const std::string key = serverKey(o);
  std::lock_guard lock(f.mutex);
  const auto now = std::chrono::steady_clock::now();
  if (const auto it = f.by_key.find(key); it != f.by_key.end() && (it->second.permanent || now < it->second.retry_at)) {
    ++f.failed_resets;
    failure = it->second.why;
    return nullptr;
  }
  try {
    auto server = servers().get(key, [&] { return std::make_shared<OpenEnvServer>(o); });
    f.by_key.erase(key);
    return server;
  } catch (const Error& e) {
    auto& memo = f.by_key[key];
    memo.why = e.what();
    memo.permanent = dynamic_cast<const ChildStartError*>(&e) != nullptr;
    memo.backoff = std::min(std::chrono::seconds(300), std::max(std::chrono::seconds(5), memo.backoff * 2));
    memo.retry_at = now + memo.backoff;
    ++f.failed_resets;
    failure = memo.why;
    spdlog::error(
        "environment.openenv.command: {}; {}", memo.why,
        memo.permanent
            ? "the program cannot run: this rank's episodes fail (env_error) and it leaves its pool"
            : fmt::format("its episodes fail (env_error) until it is tried again in {} s", memo.backoff.count()));
    return nullptr;
  }
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
  sum.errors += detail::startFailures().failed_resets.load();  // resets that found no server
  return sum;
}

std::string openEnvUnavailable() {
  auto& f = detail::startFailures();
  std::lock_guard lock(f.mutex);
  for (const auto& [key, memo] : f.by_key)
    if (memo.permanent) return memo.why;
  return {};
}

}  // namespace astraflow
