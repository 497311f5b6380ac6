// The child side of the process runner (process_spawn.hpp).
#include "tasks/process_spawn.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "astraflow/core/error.hpp"

namespace astraflow::detail {

const char* childStepName(ChildStep step) {
  switch (step) {
    case ChildStep::None: return "nothing";
    case ChildStep::Signals: return "resetting signals";
    case ChildStep::Session: return "setsid";
    case ChildStep::Stdio: return "connecting stdin/stdout/stderr";
    case ChildStep::Cwd: return "entering the working directory";
    case ChildStep::Rlimit: return "setting a resource limit";
    case ChildStep::NoNewPrivs: return "PR_SET_NO_NEW_PRIVS";
    case ChildStep::Landlock: return "landlock_restrict_self";
    case ChildStep::Credentials: return "dropping to the sandbox uid";
    case ChildStep::DeathSignal: return "PR_SET_PDEATHSIG";
    case ChildStep::Seccomp: return "installing the seccomp filter";
    case ChildStep::CloseFds: return "closing inherited descriptors";
    case ChildStep::Exec: return "execve";
  }
  return "?";
}

namespace {

[[noreturn]] void childFail(const ChildPlan& plan, ChildStep step) {
  plan.report->error = errno;
  plan.report->step = step;
  _exit(127);
}

// soft = hard = min(value, the inherited hard limit): lowering needs no privilege.
bool childLimit(int resource, rlim_t value) {
  rlimit old{};
  if (syscall(SYS_prlimit64, 0, resource, nullptr, &old) != 0) return false;
  const rlim_t v = old.rlim_max == RLIM_INFINITY ? value : std::min(value, old.rlim_max);
  const rlimit limit{v, v};
  return syscall(SYS_prlimit64, 0, resource, &limit, nullptr) == 0;
}

void childCloseFrom3() {
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
  rlimit files{};  // kernels before 5.9: one close per possible descriptor
  syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &files);
  const long last = files.rlim_cur == RLIM_INFINITY ? 65536 : static_cast<long>(files.rlim_cur);
  for (long fd = 3; fd < last; ++fd) ::close(static_cast<int>(fd));
}

// Between clone and execve: only system calls over the plan (process_spawn.hpp says why).
int childMain(void* arg) {
  const ChildPlan& plan = *static_cast<const ChildPlan*>(arg);
  const ChildIsolation& iso = *plan.isolation;
  // The host's handlers must never run here (they would run on the host's memory) and an exec
  // keeps ignored signals ignored: every disposition back to the default, then the mask the
  // parent blocked around clone emptied. glibc refuses its two internal signals; that is fine.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) childFail(plan, ChildStep::Signals);
  // Its own session and process group: no controlling terminal to inject keystrokes into, and
  // kill(-pid) reaches what it started without reaching the host.
  if (setsid() < 0) childFail(plan, ChildStep::Session);
  for (int fd = 0; fd < 3; ++fd)
    if (dup2(plan.stdio[fd], fd) < 0) childFail(plan, ChildStep::Stdio);
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) childFail(plan, ChildStep::Cwd);
  for (const auto& [resource, value] : iso.rlimits)
    if (!childLimit(resource, value)) childFail(plan, ChildStep::Rlimit);
  if ((iso.seccomp_filter != nullptr || iso.landlock_ruleset >= 0) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    childFail(plan, ChildStep::NoNewPrivs);
  if (iso.landlock_ruleset >= 0 && syscall(SYS_landlock_restrict_self, iso.landlock_ruleset, 0U) != 0)
    childFail(plan, ChildStep::Landlock);
  if (iso.drop_to) {
    const auto [uid, gid] = *iso.drop_to;
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0)
      childFail(plan, ChildStep::Credentials);
  }
  // After the credential change, which clears it: the child dies with the host's thread.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) childFail(plan, ChildStep::DeathSignal);
  if (iso.seccomp_filter != nullptr && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, iso.seccomp_filter) != 0)
    childFail(plan, ChildStep::Seccomp);
  childCloseFrom3();
  execve(plan.path, plan.argv, plan.envp);
  childFail(plan, ChildStep::Exec);
}

// Every signal blocked in the calling thread while a CLONE_VM child shares its memory, as
// posix_spawn does: a host handler must not run in the child before it has reset them.
class SignalsBlocked {
 public:
  explicit SignalsBlocked(const sigset_t& set) { pthread_sigmask(SIG_BLOCK, &set, &old_); }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_{};
};

// The child's stack, mapped for the clone and unmapped after (the child has exec'd by then).
class ChildStack {
 public:
  ChildStack() {
    base_ = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base_ == MAP_FAILED) throw Error(fmt::format("cannot map a child stack: {}", std::strerror(errno)));
  }
  ~ChildStack() { munmap(base_, kSize); }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  void* top() const { return static_cast<char*>(base_) + kSize; }

 private:
  static constexpr std::size_t kSize = 128 << 10;
  void* base_ = nullptr;
};

}  // namespace

ClonedChild cloneChild(ChildPlan& plan) {
  ChildStack stack;
  sigset_t all;
  sigfillset(&all);
  const bool root = geteuid() == 0;
  int ns_flags = 0;
  if (plan.isolation->namespaces) ns_flags = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | (root ? 0 : CLONE_NEWUSER);
  pid_t pid = -1;
  int clone_errno = 0;
  {
    const SignalsBlocked blocked(all);
    if (ns_flags != 0) pid = clone(childMain, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD | ns_flags, &plan);
    // Namespaces refused (no privilege, a container's policy, the namespace limit): the sandbox
    // falls back to its process group, seccomp and Landlock (docs/tasks.md).
    if (pid < 0 && ns_flags != 0 && errno != ENOMEM && errno != EAGAIN) ns_flags = 0;
    if (ns_flags == 0) pid = clone(childMain, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
    clone_errno = errno;
  }
  if (pid < 0) throw Error(fmt::format("cannot start {}: clone: {}", plan.path, std::strerror(clone_errno)));
  return {pid, ns_flags != 0, (ns_flags & CLONE_NEWUSER) != 0};
}

}  // namespace astraflow::detail
