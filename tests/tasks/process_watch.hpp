#pragma once
// What the sandbox and command-reward tests look at in the test process itself: its open file
// descriptors, its children, the processes of the machine that carry a marker, and what the
// kernel offers (namespaces, Landlock), probed independently of the code under test.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace astraflow::test {

inline std::size_t openFdCount() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Children of every thread of this process.
inline std::size_t childCount() {
  std::size_t n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    for (long pid; in >> pid;) ++n;
  }
  return n;
}

// Processes whose command line contains `marker` (when not empty), or whose working directory
// lies under `dir` (when not empty): what a run left behind.
inline std::vector<int> processesWith(const std::string& marker, const std::string& dir = "") {
  std::vector<int> found;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream cmdline;
    cmdline << in.rdbuf();
    std::error_code ec;
    const std::string cwd = std::filesystem::read_symlink(e.path() / "cwd", ec).string();
    if ((!marker.empty() && cmdline.str().find(marker) != std::string::npos) ||
        (!dir.empty() && cwd.rfind(dir, 0) == 0))
      found.push_back(std::stoi(name));
  }
  return found;
}

// Kills `pid`, a child of this process, and waits (up to 5 s) until waiting for it would report it,
// without reaping it. Its /proc state shows Z earlier, while the other threads of a threaded
// program are still exiting: the code under test must not be raced against that moment.
inline bool killChildAndWait(pid_t pid) {
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
    if (info.si_pid == pid) return true;
    usleep(10000);
  }
  return false;
}

inline bool landlockAvailable() { return syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U) > 0; }

// Whether this process may create PID and network namespaces (a forked probe tries).
inline bool namespacesAvailable() {
  const pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWPID | CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The test process's descriptors and children before a run, to compare after it.
class HostSnapshot {
 public:
  HostSnapshot() : fds_(openFdCount()), children_(childCount()) {}
  void expectUnchanged() const {
    EXPECT_EQ(openFdCount(), fds_) << "file descriptors leaked";
    EXPECT_EQ(childCount(), children_) << "a child process is left";
  }

 private:
  std::size_t fds_, children_;
};

}  // namespace astraflow::test
