// ServerProcess (server_process.hpp): a started server child owned until reaped.
#include "tasks/server_process.hpp"

#include <fstream>
#include <optional>

#include "tasks/child_process.hpp"
#include "tasks/spawner_thread.hpp"

namespace astraflow::detail {

struct ServerProcess::Impl {
  std::optional<ChildProcess> child;
};

ServerProcess::ServerProcess(const ProcessSpec& spec, const std::string& log_path)
    : impl_(std::make_unique<Impl>()), log_path_(log_path) {
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!null.valid() || !log.valid())
    throw Error(fmt::format("cannot open the server log {}: {}", log_path, std::strerror(errno)));
  pid_t pid = -1;  // cloned from the spawner thread: it outlives the thread that asked (spawner_thread.hpp)
  runOnSpawnerThread([&] { pid = startChildWithStdio(spec, {null.get(), log.get(), log.get()}).pid; });
  impl_->child.emplace(pid);
}

ServerProcess::~ServerProcess() = default;  // the child's destructor kills its group and reaps it

bool ServerProcess::ended() { return impl_->child->ended(); }
pid_t ServerProcess::pid() const { return impl_->child->pid(); }

std::string ServerProcess::logTail(std::size_t bytes) const {
  std::ifstream in(log_path_, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(bytes) ? size - static_cast<std::streamoff>(bytes) : 0;
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return tail;
}

}  // namespace astraflow::detail
