// The process runner of process_runner.hpp: the parent side. The child is cloned by
// process_spawn.cpp; here it is fed, read, timed, killed and reaped. Like any child it sends the
// host a SIGCHLD when it ends (ignored unless the host handles it); a host that reaps every
// child itself takes its status away (runProcess then throws, see ChildProcess::ended).
#include "astraflow/tasks/process_runner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "astraflow/core/error.hpp"
#include "tasks/child_process.hpp"

namespace astraflow::detail {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDrainAfterEnd = std::chrono::milliseconds(200);

// One of the child's outputs: kept up to the limit, read (and dropped) past it.
struct OutputStream {
  UniqueFd fd;
  std::string* text;
  bool* truncated;

  // Reads what is there now; closes the fd at end of file.
  void drain(std::size_t limit) {
    char chunk[16384];
    for (;;) {
      const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) {
        fd.reset();
        return;
      }
      const std::size_t room = limit - std::min(limit, text->size());
      text->append(chunk, std::min(room, static_cast<std::size_t>(n)));
      if (static_cast<std::size_t>(n) > room) *truncated = true;
    }
  }
};

// Its exit (code or signal) and CPU time, from its reaping.
void recordReaped(const ChildProcess::Reaped& reaped, const std::string& executable, ProcessResult& result) {
  if (reaped.lost)
    throw Error(
        fmt::format("{} was reaped elsewhere in this process (a SIGCHLD handler or a thread waiting for any "
                    "child?): its exit status is lost",
                    executable));
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  result.cpu_seconds = seconds(reaped.usage.ru_utime) + seconds(reaped.usage.ru_stime);
  if (WIFEXITED(reaped.status)) result.exit_code = WEXITSTATUS(reaped.status);
  if (WIFSIGNALED(reaped.status)) result.signal = WTERMSIG(reaped.status);
}

}  // namespace

ProcessResult runProcess(const ProcessSpec& spec) {
  ProcessResult result;
  const SigpipeSuppressed no_sigpipe;
  const auto start = Clock::now();
  StartedChild started = startChild(spec);
  ChildProcess child(started.cloned.pid);
  result.namespaces = started.cloned.namespaces;
  result.user_namespace = started.cloned.user_namespace;

  UniqueFd stdin_fd = std::move(started.in);
  if (spec.stdin_text.empty()) stdin_fd.reset();  // the child reads end of file at once
  std::size_t written = 0;
  std::array<OutputStream, 2> streams{OutputStream{std::move(started.out), &result.out, &result.out_truncated},
                                      OutputStream{std::move(started.err), &result.err, &result.err_truncated}};
  for (const UniqueFd* fd : {&stdin_fd, &streams[0].fd, &streams[1].fd})
    if (fd->valid()) setNonBlocking(*fd);
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                              std::isfinite(spec.wall_seconds) ? spec.wall_seconds : 1e9));
  bool ended = false, killed = false;
  for (;;) {
    if (!ended && child.ended()) {
      ended = true;
      child.killGroup();  // what it left running in its group (in its namespace, all is gone already)
      // What it wrote is in the pipes already; a process that left its group and holds them
      // (possible only without the PID namespace) may keep them open, but not for long.
      deadline = std::min(deadline, Clock::now() + kDrainAfterEnd);
    }
    if (ended && !streams[0].fd.valid() && !streams[1].fd.valid()) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      if (!ended) {
        child.killAll();
        result.timed_out = !killed;
      }
      break;
    }
    std::array<pollfd, 4> fds{};
    constexpr nfds_t kUnwatched = fds.size();
    nfds_t count = 0;
    auto watch = [&](int fd, short events) {
      if (fd < 0) return kUnwatched;
      fds[count] = pollfd{fd, events, 0};
      return count++;
    };
    const nfds_t in_at = watch(stdin_fd.get(), POLLOUT);
    const nfds_t out_at = watch(streams[0].fd.get(), POLLIN);
    const nfds_t err_at = watch(streams[1].fd.get(), POLLIN);
    watch(ended ? -1 : child.pollFd(), POLLIN);
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    if (!ended && child.pollFd() < 0) wait_ms = std::min<decltype(wait_ms)>(wait_ms, 10);
    if (poll(fds.data(), count, static_cast<int>(wait_ms)) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("poll on {}'s pipes: {}", spec.executable, std::strerror(errno)));
    }
    if (in_at != kUnwatched && fds[in_at].revents != 0) {
      const ssize_t n = ::write(stdin_fd.get(), spec.stdin_text.data() + written, spec.stdin_text.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      // All written, or the child closed its end (EPIPE): it reads end of file from here on.
      if (written == spec.stdin_text.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) stdin_fd.reset();
    }
    for (const auto& [stream, at] : {std::pair{&streams[0], out_at}, std::pair{&streams[1], err_at}})
      if (at != kUnwatched && fds[at].revents != 0) stream->drain(spec.output_bytes);
    if (!killed && (result.out_truncated || result.err_truncated)) {
      // Output past the limit: nothing it prints from here on can count, and a program printing
      // in a loop would otherwise run on to the deadline.
      child.killAll();
      killed = true;
      result.output_limit = true;
    }
  }
  recordReaped(child.reap(), spec.executable, result);
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::string findExecutable(const std::string& name) {
  if (name.empty()) throw Error("no program given");
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) != 0) throw Error(fmt::format("cannot run {}: {}", name, std::strerror(errno)));
    return name;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  throw Error(fmt::format("cannot run {}: not found on PATH", name));
}

}  // namespace astraflow::detail
