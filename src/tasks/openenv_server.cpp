// OpenEnvServer (openenv_server.hpp): starting, health-checking and reviving an OpenEnv server.
#include "tasks/openenv_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "astraflow/core/error.hpp"
#include "astraflow/http/http.hpp"
#include "tasks/line_process.hpp"
#include "tasks/process_registry.hpp"

namespace astraflow::detail {
namespace {

using Clock = std::chrono::steady_clock;

// A port nothing listens on now: bound to 127.0.0.1:0 and released. Another process could take
// it before the server binds it; the server then fails to start and the start is retried once.
int freePort() {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw Error(fmt::format("environment.openenv.command: cannot find a free port: {}", std::strerror(errno)));
  return ntohs(address.sin_port);
}

std::string withPort(std::string argument, int port) {
  const std::string value = std::to_string(port);
  for (std::size_t at = argument.find("{port}"); at != std::string::npos; at = argument.find("{port}", at))
    argument.replace(at, 6, value);
  return argument;
}

// The node's folder is per server: the same command, environment and log folder.
std::string serverKey(const OpenEnvOptions& o) {
  std::string key = o.url + '\x1d' + o.log_dir;
  for (const auto& a : o.command) key += '\x1f' + a;
  for (const auto& [k, v] : o.env) key += '\x1e' + k + '=' + v;
  return key;
}

bool answersHealth(const std::string& base_url) {
  HttpClient client(base_url, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  return client.get("/health").ok();
}

}  // namespace

OpenEnvServer::OpenEnvServer(const OpenEnvOptions& options) : options_(options) {
  if (options_.command.empty()) {
    base_url_ = options_.url;
    while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
    waitHealthy();
    return;
  }
  if (options_.server_per == OpenEnvServerScope::Node) {
    node_ = std::make_unique<NodeShare>("openenv", serverKey(options_));
    adoptOrStart();
    return;
  }
  startRetried();
  generation_ = starts_ - 1;
}

OpenEnvServer::~OpenEnvServer() {
  if (!node_ || !process_ || process_->ended()) return;
  // This rank started the node's server: no rank adopts it from here on, and it stops once the
  // node's other ranks are done (their locks go with their processes).
  try {
    const auto lock = node_->lockStart();
    if (!node_->othersDone(kNodeDrain))
      spdlog::warn("environment.openenv: other ranks of the node still use the server at {} after {} s; stopping it",
                   base_url_, kNodeDrain.count());
    if (const auto p = node_->published(); p && p->url == base_url_) node_->withdraw();
  } catch (const Error& e) {
    // No lock: the server stops now; a rank still using it starts the node's next one.
    spdlog::warn("environment.openenv: {}; stopping the node's server without waiting", e.what());
  }
  process_.reset();
}

void OpenEnvServer::startRetried() {
  try {
    start();
  } catch (const ChildStartError&) {
    throw;  // the program cannot run: a second try would fail the same way
  } catch (const Error& e) {
    spdlog::warn("environment.openenv: {}; starting it once more on another port", e.what());
    start();  // e.g. the picked port was taken meanwhile
  }
}

bool OpenEnvServer::adoptOrStart() {
  const auto lock = node_->lockStart();
  const auto published = node_->published();
  bool started = false;
  if (published && answersHealth(published->url)) {
    if (process_ && process_->ended()) process_.reset();
    base_url_ = published->url;
    generation_ = published->generation;
    spdlog::info("environment.openenv: using the node's server at {} (start {}; {})", base_url_, generation_,
                 node_->folder());
  } else {
    startRetried();
    generation_ = published ? published->generation + 1 : 0;
    node_->publish({base_url_, generation_});
    started = true;
  }
  node_->joinUsers();
  return started;
}

OpenEnvServer::Endpoint OpenEnvServer::sessionEndpoint() const {
  std::lock_guard lock(mutex_);
  return {"ws://" + base_url_.substr(std::string_view("http://").size()) + "/ws", generation_};
}

void OpenEnvServer::start() {
  const int port = freePort();
  ProcessSpec spec;
  for (const std::string& a : options_.command) spec.argv.push_back(withPort(a, port));
  spec.executable = findExecutable(spec.argv.front());
  spec.env = lineProcessEnvironment(options_.env);
  std::filesystem::create_directories(options_.log_dir);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // Numbered per process, not per server: two servers of one process never share a log.
  static std::atomic<int> process_starts{0};
  ++starts_;
  const std::string log = (std::filesystem::path(options_.log_dir) /
                           fmt::format("openenv-{}-{}-{}.log", host, ::getpid(), process_starts++))
                              .string();
  process_.reset();
  process_ = std::make_unique<ServerProcess>(spec, log);
  base_url_ = fmt::format("http://127.0.0.1:{}", port);
  waitHealthy();
  spdlog::info("environment.openenv: server {} (pid {}) answers at {}; log {}", spec.argv.front(), process_->pid(),
               base_url_, log);
}

void OpenEnvServer::waitHealthy() {
  HttpClient client(base_url_, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.start_seconds));
  auto pause = std::chrono::milliseconds(50);
  std::string last;
  for (;;) {
    if (process_ && process_->ended())
      throw Error(fmt::format("environment.openenv.command: the server ended before answering {}/health{}", base_url_,
                              logNote()));
    const HttpResult r = client.get("/health");
    if (r.ok()) return;
    last = r.transportOk() ? fmt::format("HTTP {}", r.status) : r.error;
    if (Clock::now() >= deadline)
      throw Error(
          fmt::format("environment.openenv: {}/health did not answer within {} s (last: {}; "
                      "environment.openenv.start_seconds){}",
                      base_url_, options_.start_seconds, last, logNote()));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

std::string OpenEnvServer::listedTools() const {
  std::lock_guard lock(mutex_);
  return tools_json_;
}

void OpenEnvServer::rememberTools(std::string tools_json) {
  std::lock_guard lock(mutex_);
  tools_json_ = std::move(tools_json);
}

bool OpenEnvServer::reviveIfDead(int generation, std::chrono::milliseconds grace) {
  std::lock_guard lock(mutex_);
  // A session of an earlier start: that server is gone and this one was started after it.
  if (generation != generation_) return false;
  if (process_) {
    // A dying process closes its sockets before it is a zombie: a connection it dropped can be
    // seen a moment before it has ended.
    const auto until = Clock::now() + grace;
    while (!process_->ended()) {
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    spdlog::warn("environment.openenv: the server (pid {}) has ended; starting it again{}", process_->pid(), logNote());
  } else if (!node_ || answersHealth(base_url_)) {
    return false;  // a url server is not ours to start; another rank's node server still answers
  } else {
    spdlog::warn("environment.openenv: the node's server at {} no longer answers; taking the node's next one",
                 base_url_);
  }
  try {
    if (!node_) {
      start();
      generation_ = starts_ - 1;
    } else if (!adoptOrStart()) {
      return true;  // another rank of the node started it again already
    }
  } catch (const Error& e) {
    spdlog::error("environment.openenv: could not start the server again: {}", e.what());
    return false;
  }
  ++counters_.restarts;
  return true;
}

std::string OpenEnvServer::logNote() const {
  if (!process_) return "";
  std::string tail = process_->logTail(2048);
  if (tail.empty()) return fmt::format("; its log {} is empty", process_->logPath());
  return fmt::format("; its log {} ends:\n{}", process_->logPath(), tail);
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
