#pragma once
// The parent's side of a started child, shared by the process runner (process_runner.cpp: one run
// to its end) and the line process (line_process.cpp: a child that stays running and answers a
// line per line): SIGPIPE kept off the host, the child owned until reaped, close-on-exec pipes.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/process_runner.hpp"
#include "tasks/process_spawn.hpp"

extern char** environ;

namespace astraflow::detail {

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
  pid_t pid() const { return pid_; }

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
inline Pipe makePipe() {
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

inline void setNonBlocking(const UniqueFd& fd) { fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK); }

inline std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// A child started from `spec` (executable, argv, env, cwd, isolation) with `stdio` as its stdin,
// stdout and stderr. Throws ChildStartError (the child reaped) when a set-up step or the execve
// failed, Error when it could not be cloned.
inline ClonedChild startChildWithStdio(const ProcessSpec& spec, const std::array<int, 3>& stdio) {
  const std::vector<char*> argv = cStrings(spec.argv);
  const std::vector<char*> env = spec.env ? cStrings(*spec.env) : std::vector<char*>{};
  ChildReport report;
  ChildPlan plan{spec.executable.c_str(),
                 argv.data(),
                 spec.env ? env.data() : environ,
                 spec.cwd.empty() ? nullptr : spec.cwd.c_str(),
                 stdio,
                 &spec.isolation,
                 &report};
  const ClonedChild cloned = cloneChild(plan);
  if (report.step != ChildStep::None) {
    ChildProcess(cloned.pid).reap();
    throw ChildStartError(fmt::format("cannot start {}: {} failed: {}", spec.executable, childStepName(report.step),
                                      std::strerror(report.error)));
  }
  return cloned;
}

// The same with its stdio on pipes: the parent's ends, the child's closed here.
struct StartedChild {
  ClonedChild cloned;
  UniqueFd in, out, err;  // its stdin (write), stdout and stderr (read)
};
inline StartedChild startChild(const ProcessSpec& spec) {
  Pipe in = makePipe(), out = makePipe(), err = makePipe();
  const ClonedChild cloned = startChildWithStdio(spec, {in.read.get(), out.write.get(), err.write.get()});
  return {cloned, std::move(in.write), std::move(out.read), std::move(err.read)};  // the child's ends close here
}

}  // namespace astraflow::detail
