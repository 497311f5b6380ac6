#pragma once
// The one place tasks start a child process: the sandbox (sandbox.cpp) and the `command` reward
// (command_reward.cpp) both run through runProcess, and differ only in the ChildIsolation they
// ask for. The parent feeds stdin, reads stdout and stderr into bounded buffers, kills the child
// at the wall deadline or past the output limit, and always reaps it.
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/error.hpp"

struct sock_fprog;  // <linux/filter.h>

namespace astraflow::detail {

// Owns one file descriptor; closes it once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// What the child sets up between clone and exec; everything off is a plain child (own session
// and process group, signals reset, fds above 2 closed), as the `command` reward runs.
struct ChildIsolation {
  bool namespaces = false;                         // new PID, network, IPC (and user, not root) namespaces
  std::vector<std::pair<int, rlim_t>> rlimits;     // resource → soft = hard limit
  const sock_fprog* seccomp_filter = nullptr;      // installed last before exec
  int landlock_ruleset = -1;                       // landlock_restrict_self with it when >= 0
  std::optional<std::pair<uid_t, gid_t>> drop_to;  // credentials after set-up (the caller is root)
};

struct ProcessSpec {
  std::string executable;                       // a path (findExecutable resolves a name)
  std::vector<std::string> argv;                // argv[0] included
  std::optional<std::vector<std::string>> env;  // "K=V" entries; nullopt: the host's environment
  std::string cwd;                              // empty: the host's
  std::string stdin_text;
  double wall_seconds = 10;
  std::size_t output_bytes = 64 << 10;  // stdout and stderr each
  ChildIsolation isolation;
};

struct ProcessResult {
  int exit_code = -1;         // when it exited; -1 when a signal ended it
  int signal = 0;             // the signal that ended it, 0 when it exited
  bool timed_out = false;     // killed by us at the wall deadline
  bool output_limit = false;  // killed by us for output past output_bytes
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
  double wall_seconds = 0, cpu_seconds = 0;  // cpu: user + system of it and its reaped descendants
  bool namespaces = false;                   // the namespaces asked for were granted
  bool user_namespace = false;               // … with a user namespace (the caller is not root)
};

// A set-up step of the child (or its execve) failed: the program never ran.
class ChildStartError : public Error {
 public:
  using Error::Error;
};

// Runs the child to its end. Throws ChildStartError when a set-up step or the execve fails,
// astraflow::Error when it cannot be started at all (clone refused, no pipe) or was reaped by
// another part of the host; never for what the program does.
// Safe to call from several threads at once; changes no signal disposition of the host.
ProcessResult runProcess(const ProcessSpec& spec);

// `name` itself when it holds a '/', else the first executable PATH entry holding it (Error if none).
std::string findExecutable(const std::string& name);

}  // namespace astraflow::detail
