// ManagedServer (astraflow/tasks/managed_server.hpp): starting, health-checking, reviving and
// stopping a server process, per rank or shared by a node's ranks.
#include "astraflow/tasks/managed_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "astraflow/core/error.hpp"
#include "astraflow/http/http.hpp"
#include "tasks/line_process.hpp"
#include "tasks/node_share.hpp"
#include "tasks/server_process.hpp"

namespace astraflow {
namespace {

using Clock = std::chrono::steady_clock;

// A port nothing listens on now: bound to 127.0.0.1:0 and released. Another process could take
// it before the server binds it; the server then fails to start and the start is retried once.
int freePort(const std::string& config_key) {
  const detail::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw Error(fmt::format("{}.command: cannot find a free port: {}", config_key, std::strerror(errno)));
  return ntohs(address.sin_port);
}

bool answers(const std::string& base_url, const std::string& health_path) {
  HttpClient client(base_url, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  return client.get(health_path).ok();
}

// Polls `health_path` until it answers, the deadline passes (Error) or `ended()` says the
// process is gone (Error); `note` is appended to the errors (a started server's log).
void pollHealth(const std::string& base_url, const ManagedServerOptions& o, const std::function<bool()>& ended,
                const std::function<std::string()>& note) {
  HttpClient client(base_url, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.start_seconds));
  auto pause = std::chrono::milliseconds(50);
  for (;;) {
    if (ended())
      throw Error(fmt::format("{}.command: the server ended before answering {}{}{}", o.config_key, base_url,
                              o.health_path, note()));
    const HttpResult r = client.get(o.health_path);
    if (r.ok()) return;
    const std::string last = r.transportOk() ? fmt::format("HTTP {}", r.status) : r.error;
    if (Clock::now() >= deadline)
      throw Error(fmt::format("{}: {}{} did not answer within {} s (last: {}; {}.start_seconds){}", o.config_key,
                              base_url, o.health_path, o.start_seconds, last, o.config_key, note()));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

}  // namespace

struct ManagedServer::Impl {
  ManagedServerOptions options;
  mutable std::mutex mutex;
  std::unique_ptr<detail::ServerProcess> process;
  std::unique_ptr<detail::NodeShare> node;  // per_node
  std::string base_url;                     // http://127.0.0.1:port
  int starts = 0;                           // by this object
  int generation = 0;                       // of the server base_url reaches
  int revived = 0;                          // servers reviveIfDead started again itself
  bool given_up = false;                    // died again past options.max_restarts
  // After a start that failed, the next try waits (5 s, doubling to 60 s): a program that cannot
  // start is not spawned at every call.
  Clock::time_point next_try{};
  std::chrono::seconds pause{5};

  void start();
  void startRetried();
  bool adoptOrStart();
  std::string logNote() const;
};

ManagedServer::ManagedServer(ManagedServerOptions options) : impl_(std::make_unique<Impl>()) {
  auto& im = *impl_;
  im.options = std::move(options);
  if (im.options.per_node) {
    im.node = std::make_unique<detail::NodeShare>(im.options.name, im.options.identity);
    im.adoptOrStart();
    return;
  }
  im.startRetried();
  im.generation = im.starts - 1;
}

ManagedServer::~ManagedServer() {
  auto& im = *impl_;
  if (!im.node || !im.process || im.process->ended()) return;
  // This rank started the node's server: no rank adopts it from here on, and it stops once the
  // node's other ranks are done (their locks go with their processes).
  try {
    const auto lock = im.node->lockStart();
    if (!im.node->othersDone(kNodeDrain))
      spdlog::warn("{}: other ranks of the node still use the server at {} after {} s; stopping it",
                   im.options.config_key, im.base_url, kNodeDrain.count());
    if (const auto p = im.node->published(); p && p->url == im.base_url) im.node->withdraw();
  } catch (const Error& e) {
    // No lock: the server stops now; a rank still using it starts the node's next one.
    spdlog::warn("{}: {}; stopping the node's server without waiting", im.options.config_key, e.what());
  }
  im.process.reset();
}

void ManagedServer::Impl::startRetried() {
  try {
    start();
  } catch (const detail::ChildStartError&) {
    throw;  // the program cannot run: a second try would fail the same way
  } catch (const Error& e) {
    spdlog::warn("{}: {}; starting it once more on another port", options.config_key, e.what());
    start();  // e.g. the picked port was taken meanwhile
  }
}

bool ManagedServer::Impl::adoptOrStart() {
  const auto lock = node->lockStart();
  const auto published = node->published();
  bool started = false;
  if (published && answers(published->url, options.health_path)) {
    if (process && process->ended()) process.reset();
    base_url = published->url;
    generation = published->generation;
    spdlog::info("{}: using the node's server at {} (start {}; {})", options.config_key, base_url, generation,
                 node->folder());
  } else {
    startRetried();
    generation = published ? published->generation + 1 : 0;
    node->publish({base_url, generation});
    started = true;
  }
  node->joinUsers();
  return started;
}

void ManagedServer::Impl::start() {
  const int port = freePort(options.config_key);
  detail::ProcessSpec spec;
  spec.argv = options.command(port);
  if (spec.argv.empty()) throw Error(fmt::format("{}.command: is empty", options.config_key));
  try {
    spec.executable = detail::findExecutable(spec.argv.front());
  } catch (const Error& e) {
    throw detail::ChildStartError(e.what());  // missing or not executable: no second try mends it
  }
  spec.env = detail::lineProcessEnvironment(options.env);
  std::filesystem::create_directories(options.log_dir);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // Numbered per process, not per server: two servers of one process never share a log.
  static std::atomic<int> process_starts{0};
  ++starts;
  const std::string log = (std::filesystem::path(options.log_dir) /
                           fmt::format("{}-{}-{}-{}.log", options.name, host, ::getpid(), process_starts++))
                              .string();
  process.reset();
  process = std::make_unique<detail::ServerProcess>(spec, log);
  base_url = fmt::format("http://127.0.0.1:{}", port);
  pollHealth(
      base_url, options, [this] { return process->ended(); }, [this] { return logNote(); });
  spdlog::info("{}: server {} (pid {}) answers at {}; log {}", options.config_key, spec.argv.front(), process->pid(),
               base_url, log);
}

std::string ManagedServer::Impl::logNote() const {
  if (!process) return "";
  std::string tail = process->logTail(2048);
  if (tail.empty()) return fmt::format("; its log {} is empty", process->logPath());
  return fmt::format("; its log {} ends:\n{}", process->logPath(), tail);
}

ManagedServer::Endpoint ManagedServer::endpoint() const {
  std::lock_guard lock(impl_->mutex);
  return {impl_->base_url, impl_->generation};
}

bool ManagedServer::givenUp() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->given_up;
}

int ManagedServer::restarts() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->revived;
}

bool ManagedServer::reviveIfDead(int generation, std::chrono::milliseconds grace) {
  auto& im = *impl_;
  std::lock_guard lock(im.mutex);
  // A call to an earlier start: that server is gone and this one was started after it.
  if (generation != im.generation || im.given_up || Clock::now() < im.next_try) return false;
  if (im.process) {
    // A dying process closes its sockets before it is a zombie: a connection it dropped can be
    // seen a moment before it has ended.
    const auto until = Clock::now() + grace;
    while (!im.process->ended()) {
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    spdlog::warn("{}: the server (pid {}) has ended; starting it again{}", im.options.config_key, im.process->pid(),
                 im.logNote());
  } else if (!im.node || answers(im.base_url, im.options.health_path)) {
    return false;  // another rank's node server still answers
  } else {
    spdlog::warn("{}: the node's server at {} no longer answers; taking the node's next one", im.options.config_key,
                 im.base_url);
  }
  if (im.options.max_restarts >= 0 && im.revived >= im.options.max_restarts) {
    spdlog::error("{}: the server died again after {} restarts ({}.max_restarts): given up", im.options.config_key,
                  im.revived, im.options.config_key);
    im.given_up = true;
    return false;
  }
  try {
    if (!im.node) {
      im.start();
      im.generation = im.starts - 1;
    } else if (!im.adoptOrStart()) {
      return true;  // another rank of the node started it again already
    }
  } catch (const Error& e) {
    spdlog::error("{}: could not start the server again (next try in {} s): {}", im.options.config_key,
                  im.pause.count(), e.what());
    im.next_try = Clock::now() + im.pause;
    im.pause = std::min(im.pause * 2, std::chrono::seconds(60));
    return false;
  }
  im.pause = std::chrono::seconds(5);
  ++im.revived;
  return true;
}

void waitUntilAnswers(const std::string& base_url, const std::string& health_path, double seconds,
                      const std::string& config_key) {
  ManagedServerOptions o;
  o.config_key = config_key;
  o.health_path = health_path;
  o.start_seconds = seconds;
  pollHealth(
      base_url, o, [] { return false; }, [] { return std::string(); });
}

}  // namespace astraflow
