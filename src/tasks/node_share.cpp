// NodeShare (node_share.hpp): the node-local folder and locks through which the ranks of a node
// share one environment server.
#include "tasks/node_share.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "astraflow/core/error.hpp"
#include "tasks/deterministic_hash.hpp"

namespace astraflow::detail {
namespace {

UniqueFd openLockFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) throw Error(fmt::format("{}: cannot be opened: {}", path, std::strerror(errno)));
  return fd;
}

// flock, retried when a signal interrupts it.
int lockFile(int fd, int operation) {
  int rc;
  while ((rc = ::flock(fd, operation)) != 0 && errno == EINTR) {
  }
  return rc;
}

}  // namespace

NodeShare::NodeShare(const std::string& name, const std::string& key) {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path base =
      std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / fmt::format("astraflow-{}", ::getuid());
  folder_ = (base / fmt::format("{}-{:016x}", name, hashString(0, key))).string();
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  if (ec) throw Error(fmt::format("{}: the node's shared folder cannot be made: {}", folder_, ec.message()));
  start_fd_ = openLockFile(folder_ + "/start.lock");
  users_fd_ = openLockFile(folder_ + "/users.lock");
}

NodeShare::StartLock::StartLock(int fd) : fd_(fd) {
  if (lockFile(fd_, LOCK_EX) != 0) throw Error(fmt::format("flock(start.lock): {}", std::strerror(errno)));
}
NodeShare::StartLock::~StartLock() { lockFile(fd_, LOCK_UN); }

NodeShare::StartLock NodeShare::lockStart() { return StartLock(start_fd_.get()); }

std::optional<NodeShare::Published> NodeShare::published() const {
  std::ifstream in(folder_ + "/server");
  Published p;
  if (!(in >> p.url >> p.generation)) return std::nullopt;
  return p;
}

void NodeShare::publish(const Published& server) {
  const std::string temporary = fmt::format("{}/server.{}", folder_, ::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << server.url << ' ' << server.generation << '\n';
    if (!out.flush()) throw Error(fmt::format("{}: cannot be written", temporary));
  }
  std::filesystem::rename(temporary, folder_ + "/server");
}

void NodeShare::withdraw() {
  std::error_code ec;
  std::filesystem::remove(folder_ + "/server", ec);
}

void NodeShare::joinUsers() {
  if (joined_) return;
  if (lockFile(users_fd_.get(), LOCK_SH) != 0) throw Error(fmt::format("flock(users.lock): {}", std::strerror(errno)));
  joined_ = true;
}

bool NodeShare::othersDone(std::chrono::milliseconds wait) {
  // Converting the shared lock to an exclusive one succeeds once no other process holds it.
  const auto until = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::milliseconds(10);
  while (lockFile(users_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  lockFile(users_fd_.get(), LOCK_UN);
  joined_ = false;
  return true;
}

}  // namespace astraflow::detail
