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
#include "tasks/process_spawn.hpp"

extern char** environ;

namespace astraflow::detail {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDrainAfterEnd = std::chrono::milliseconds(200);

// A write to a child that has closed its stdin raises SIGPIPE, which would end the host. It is
// blocked in this thread for the run, and one the run raised is taken off before unblocking;
// no disposition of the process changes.
class SigpipeSuppressed {
 public:
  SigpipeSuppressed() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeSuppressed() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeSuppressed(const SigpipeSuppressed&) = delete;
  SigpipeSuppressed& operator=(const SigpipeSuppressed&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

// The started child until it is reaped: the destructor kills and reaps one that is not, so no
// exit path leaves a process or a zombie behind.
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid) : pid_(pid), pidfd_(static_cast<int>(syscall(SYS_pidfd_open, pid, 0U))) {}
  ~ChildProcess() {
    if (pid_ <= 0) return;
    killAll();
    reap();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // It and its process group (its pid: setsid). Safe while it is unreaped: its pid, and so the
  // group id, cannot be taken by another process. In its own PID namespace, killing it (the
  // namespace's init) kills every process of the namespace.
  void killAll() const {
    if (pidfd_.valid()) syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0U);
    if (lost_) return;  // its pid may be another process's by now
    ::kill(pid_, SIGKILL);
    ::kill(-pid_, SIGKILL);
  }
  void killGroup() const {
    if (!lost_) ::kill(-pid_, SIGKILL);
  }
  // Whether it has ended, without reaping it. After its execve it is an ordinary SIGCHLD
  // child: a host thread waiting for any child (waitpid(-1)) can reap it first, and then its
  // status is lost (reap says so) rather than waited for until the deadline.
  bool ended() {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0) {
      lost_ = errno == ECHILD;
      return lost_;
    }
    return info.si_pid == pid_;
  }
  int pollFd() const { return pidfd_.get(); }

  struct Reaped {
    int status = 0;
    rusage usage{};
    bool lost = false;  // reaped elsewhere in the host: status and usage unknown
  };
  Reaped reap() {
    Reaped r;
    while (!lost_ && wait4(pid_, &r.status, __WALL, &r.usage) < 0) {
      if (errno != EINTR) lost_ = true;
    }
    r.lost = lost_;
    pid_ = -1;
    return r;
  }

 private:
  pid_t pid_;
  UniqueFd pidfd_;     // readable when it ends (kernels ≥ 5.3); else the loop polls every 10 ms
  bool lost_ = false;  // someone else reaped it
};

struct Pipe {
  UniqueFd read, write;
};

// Both ends above 2 (a host that closed its stdin would otherwise get fd 0 back, and the
// child's dup2 onto it would be a no-op that keeps close-on-exec) and close-on-exec, so a
// concurrent spawn elsewhere in the host inherits neither.
Pipe makePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  auto above2 = [](int fd) {
    if (fd > 2) return UniqueFd(fd);
    UniqueFd low(fd);
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (moved < 0) throw Error(fmt::format("cannot move a pipe above stdio: {}", std::strerror(errno)));
    return UniqueFd(moved);
  };
  UniqueFd read = above2(fds[0]);
  UniqueFd write = above2(fds[1]);
  return {std::move(read), std::move(write)};
}

void setNonBlocking(const UniqueFd& fd) { fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK); }

std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

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

}  // namespace

ProcessResult runProcess(const ProcessSpec& spec) {
  ProcessResult result;
  Pipe in = makePipe(), out = makePipe(), err = makePipe();
  const std::vector<char*> argv = cStrings(spec.argv);
  const std::vector<char*> env = spec.env ? cStrings(*spec.env) : std::vector<char*>{};
  ChildReport report;
  ChildPlan plan{spec.executable.c_str(),
                 argv.data(),
                 spec.env ? env.data() : environ,
                 spec.cwd.empty() ? nullptr : spec.cwd.c_str(),
                 {in.read.get(), out.write.get(), err.write.get()},
                 &spec.isolation,
                 &report};
  const SigpipeSuppressed no_sigpipe;
  const auto start = Clock::now();
  const ClonedChild cloned = cloneChild(plan);
  ChildProcess child(cloned.pid);
  result.namespaces = cloned.namespaces;
  result.user_namespace = cloned.user_namespace;
  in.read.reset();
  out.write.reset();
  err.write.reset();
  if (report.step != ChildStep::None) {
    child.reap();
    throw ChildStartError(fmt::format("cannot start {}: {} failed: {}", spec.executable, childStepName(report.step),
                                      std::strerror(report.error)));
  }

  UniqueFd stdin_fd = std::move(in.write);
  if (spec.stdin_text.empty()) stdin_fd.reset();  // the child reads end of file at once
  std::size_t written = 0;
  std::array<OutputStream, 2> streams{OutputStream{std::move(out.read), &result.out, &result.out_truncated},
                                      OutputStream{std::move(err.read), &result.err, &result.err_truncated}};
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
  const ChildProcess::Reaped reaped = child.reap();
  if (reaped.lost)
    throw Error(
        fmt::format("{} was reaped elsewhere in this process (a SIGCHLD handler or a thread waiting for any "
                    "child?): its exit status is lost",
                    spec.executable));
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  result.cpu_seconds = seconds(reaped.usage.ru_utime) + seconds(reaped.usage.ru_stime);
  if (WIFEXITED(reaped.status)) result.exit_code = WEXITSTATUS(reaped.status);
  if (WIFSIGNALED(reaped.status)) result.signal = WTERMSIG(reaped.status);
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
