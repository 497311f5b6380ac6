// The sandbox against what a model-written program can do to its host: loop forever, fork
// without end, leave daemons, eat memory, write a gigabyte, use the network, read the host's
// files, signal the host. Each run must end within its limits with the right outcome, leave no
// process (found by a marker the program puts in its children's command lines) and no temp
// dir, and leave the test process as it was (its fds and children counted before and after).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/sandbox.hpp"
#include "io/temp_dir.hpp"
#include "tasks/process_watch.hpp"

using namespace astraflow;

namespace sandbox_tests {

std::string uniqueMarker() {
  static std::atomic<int> counter{0};
  return "astraflow-sbx-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// `text` with every "@" + key + "@" replaced by `value` (Python's braces stay as they are).
std::string substituted(std::string text, const std::string& key, const std::string& value) {
  const std::string token = "@" + key + "@";
  for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at + value.size()))
    text.replace(at, token.size(), value);
  return text;
}

SandboxRequest python(const std::string& program, double wall_seconds = 5) {
  SandboxRequest r;
  r.program = program;
  r.limits.wall_seconds = wall_seconds;
  r.limits.memory_bytes = 256ULL << 20;
  return r;
}

// The run left nothing: no process with the marker (if any) or inside its temp dir, no temp dir.
void expectNothingLeft(const SandboxResult& r, const std::string& marker = "") {
  EXPECT_FALSE(r.temp_dir.empty());
  EXPECT_FALSE(std::filesystem::exists(r.temp_dir)) << r.temp_dir << " is left";
  EXPECT_TRUE(test::processesWith(marker, r.temp_dir).empty()) << "a process of the run is left";
}

TEST(Sandbox, RunsAProgramIsolatedAndCleansUp) {
  const test::HostSnapshot host;
  // What the host has that the program must not inherit: a descriptor without close-on-exec,
  // an ignored signal, a blocked one.
  const int inheritable = open("/dev/null", O_RDONLY);
  ASSERT_GE(inheritable, 3);
  const auto old_usr1 = signal(SIGUSR1, SIG_IGN);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
  SandboxRequest request = python(R"(
import os, signal, sys
print(sys.stdin.read()[::-1])
print(os.getcwd() == os.environ["HOME"] == os.environ["TMPDIR"])
print(sorted(os.environ))
print(os.getuid(), os.getpid())
open_fds = []
for fd in range(3, 256):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(open_fds)
print(signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL, signal.pthread_sigmask(signal.SIG_BLOCK, []))
)");
  request.stdin_text = "olleh";
  const SandboxResult r = runSandboxed(request);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  signal(SIGUSR1, old_usr1);
  close(inheritable);
  ASSERT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  EXPECT_EQ(r.exit_code, 0);
  const bool ns = test::namespacesAvailable();
  const bool root = geteuid() == 0;
  std::istringstream out(r.stdout_text);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "hello");
  std::getline(out, line);
  EXPECT_EQ(line, "True");  // it runs in its temp dir, which is its HOME and TMPDIR
  std::getline(out, line);
  EXPECT_EQ(line,
            "['HOME', 'LANG', 'LC_ALL', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED', 'PYTHONIOENCODING', "
            "'TMPDIR']");  // nothing of the host's environment
  std::getline(out, line);
  const auto space = line.find(' ');
  if (root) {
    EXPECT_NE(line.substr(0, space), "0") << "still root";
  }
  if (ns) {
    EXPECT_EQ(line.substr(space + 1), "1") << "not its own PID namespace's init";
  }
  std::getline(out, line);
  EXPECT_EQ(line, "[]") << "descriptors above 2 inherited";
  std::getline(out, line);
  EXPECT_EQ(line, "True set()") << "the host's signal dispositions or mask inherited";
  EXPECT_EQ(r.isolation.pid_namespace, ns);
  EXPECT_EQ(r.isolation.network_namespace, ns);
  EXPECT_EQ(r.isolation.unprivileged_uid, root);
  EXPECT_EQ(r.isolation.landlock, test::landlockAvailable());
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_TRUE(r.isolation.seccomp);
#endif
  expectNothingLeft(r);
  host.expectUnchanged();
}

TEST(Sandbox, InfiniteLoopEndsAtTheWallDeadline) {
  const test::HostSnapshot host;
  SandboxRequest request = python("while True:\n    pass\n", 1.0);
  request.limits.cpu_seconds = 30;
  const SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::Timeout);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_GE(r.wall_seconds, 1.0);
  EXPECT_LT(r.wall_seconds, 3.0);
  expectNothingLeft(r);
  host.expectUnchanged();
}

TEST(Sandbox, InfiniteLoopEndsAtItsCpuLimit) {
  SandboxRequest request = python("while True:\n    pass\n", 20);
  request.limits.cpu_seconds = 1;
  const SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::Timeout);
  EXPECT_GE(r.cpu_seconds, 0.95);
  EXPECT_LT(r.wall_seconds, 10.0) << "the CPU limit did not stop it";
}

TEST(Sandbox, ForkBombIsCappedAndLeavesNothing) {
  const test::HostSnapshot host;
  const std::string marker = uniqueMarker();
  const SandboxResult r = runSandboxed(python(substituted(R"(
import os
count = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0 and os.getpid() % 3 == 0:
        os.execv("/bin/sleep", ["@M@", "1000"])
)",
                                                          "M", marker),
                                              1.5));
  EXPECT_EQ(r.outcome, SandboxOutcome::Timeout);
  EXPECT_LT(r.wall_seconds, 4.0);
  expectNothingLeft(r, marker);
  host.expectUnchanged();
}

TEST(Sandbox, ProcessLimitCapsForks) {
  SandboxRequest request = python(R"(
import os, time
n = 0
for _ in range(100):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError:
        break
print(n)
)");
  request.limits.processes = 8;
  const SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "7\n");  // 8 processes of its uid: itself and 7 children
  expectNothingLeft(r);             // the sleeping children (in its temp dir) went with it
}

TEST(Sandbox, DoubleForkedDaemonDiesWithTheRun) {
  // Without the PID namespace the run's uid is swept instead; without either nothing finds it.
  if (!test::namespacesAvailable() && geteuid() != 0) GTEST_SKIP() << "a setsid daemon may outlive it (docs/tasks.md)";
  const test::HostSnapshot host;
  const std::string marker = uniqueMarker();
  const SandboxResult r = runSandboxed(python(substituted(R"(
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["@M@", "1000"])
    os._exit(0)
time.sleep(0.3)
print("daemon started")
)",
                                                          "M", marker)));
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "daemon started\n");
  EXPECT_LT(r.wall_seconds, 2.0) << "the daemon's hold on the output pipes kept the run";
  expectNothingLeft(r, marker);
  host.expectUnchanged();
}

TEST(Sandbox, MemoryHogHitsItsLimit) {
  const test::HostSnapshot host;
  for (const char* program :
       {"x = bytearray(2 * 1024 ** 3)\n", "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n"}) {
    const SandboxResult r = runSandboxed(python(program));
    EXPECT_EQ(r.outcome, SandboxOutcome::MemoryLimit) << program << r.stderr_text;
    EXPECT_LT(r.wall_seconds, 4.0);
    expectNothingLeft(r);
  }
  host.expectUnchanged();
}

TEST(Sandbox, GigabyteWriteStopsAtTheFileLimit) {
  const test::HostSnapshot host;
  SandboxRequest request = python(R"(
with open("big", "wb") as f:
    for _ in range(1024):
        f.write(b"\0" * 2 ** 20)
)");
  request.limits.file_bytes = 4ULL << 20;
  const SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("File too large"), std::string::npos) << r.stderr_text;
  expectNothingLeft(r);
  host.expectUnchanged();
}

TEST(Sandbox, GigabyteToStdoutStopsAtTheOutputLimit) {
  SandboxRequest request = python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n");
  request.limits.output_bytes = 100000;
  const SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::OutputLimit);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stdout_text.size(), 100000U);
  EXPECT_LT(r.wall_seconds, 3.0);
  expectNothingLeft(r);
}

TEST(Sandbox, NoNetwork) {
  const test::HostSnapshot host;
  // A listener on the host's loopback, which the program would reach without the sandbox.
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const SandboxResult r = runSandboxed(python(substituted(R"(
import socket
def attempt(what, f):
    try:
        f()
        print(what, "worked")
    except OSError as e:
        print(what, type(e).__name__)
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", @PORT@), timeout=1))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("resolve", lambda: socket.getaddrinfo("example.com", 80))
attempt("unix", lambda: socket.socketpair())
)",
                                                          "PORT", std::to_string(ntohs(addr.sin_port)))));
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  // seccomp refuses the sockets (EPERM); the resolver fails one way or another, it must not work.
  EXPECT_EQ(r.stdout_text.substr(0, r.stdout_text.find("resolve")),
            "tcp PermissionError\nudp PermissionError\ninet6 PermissionError\nnetlink PermissionError\n");
  EXPECT_EQ(r.stdout_text.find("resolve worked"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("\nunix worked\n"), std::string::npos) << r.stdout_text;
  EXPECT_LT(accept(listener, nullptr, nullptr), 0) << "the program reached the host's loopback";
  close(listener);
  expectNothingLeft(r);
  host.expectUnchanged();
}

TEST(Sandbox, CannotReadTheHostsFiles) {
  const test::HostSnapshot host;
  // A world-readable file in a folder only root may enter: the uid drop keeps it out.
  test::TempDir secret_dir;
  ASSERT_EQ(chmod(secret_dir.path().c_str(), 0700), 0);
  std::ofstream(secret_dir.file("secret.txt")) << "root-only-token";
  ASSERT_EQ(chmod(secret_dir.file("secret.txt").c_str(), 0644), 0);
  // A world-readable file in a world-readable folder: only Landlock keeps it out.
  test::TempDir open_dir;
  ASSERT_EQ(chmod(open_dir.path().c_str(), 0755), 0);
  std::ofstream(open_dir.file("open.txt")) << "readable-token";
  ASSERT_EQ(chmod(open_dir.file("open.txt").c_str(), 0644), 0);
  // A new file in /tmp (the world may write there): only Landlock keeps it out.
  const std::string escape = "/tmp/" + uniqueMarker();
  const SandboxResult r =
      runSandboxed(python(substituted(substituted(substituted(R"(
def attempt(what, f):
    try:
        print(what, f())
    except OSError as e:
        print(what, type(e).__name__)
attempt("secret", lambda: open("@SECRET@").read())
attempt("open", lambda: open("@OPEN@").read())
attempt("write", lambda: open("@ESCAPE@", "w").write("x"))
attempt("shadow", lambda: open("/etc/shadow").read()[:0])
)",
                                                              "SECRET", secret_dir.file("secret.txt")),
                                                  "OPEN", open_dir.file("open.txt")),
                                      "ESCAPE", escape)));
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  const bool landlock = test::landlockAvailable();
  if (geteuid() == 0 || landlock) {
    EXPECT_NE(r.stdout_text.find("secret PermissionError\n"), std::string::npos) << r.stdout_text;
  }
  if (landlock) {
    EXPECT_NE(r.stdout_text.find("open PermissionError\n"), std::string::npos) << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("write PermissionError\n"), std::string::npos) << r.stdout_text;
  }
  EXPECT_EQ(std::filesystem::exists(escape), !landlock);
  std::filesystem::remove(escape);
  EXPECT_NE(r.stdout_text.find("shadow PermissionError\n"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("token"), std::string::npos) << r.stdout_text;
  expectNothingLeft(r);
  host.expectUnchanged();
}

TEST(Sandbox, CannotSignalTheHost) {
  // A process of the host beside the test process, to see that nothing reached it either.
  pid_t sentinel = 0;
  char sleep_arg0[] = "sleep", sleep_arg1[] = "30";
  char* sleep_argv[] = {sleep_arg0, sleep_arg1, nullptr};
  ASSERT_EQ(posix_spawn(&sentinel, "/bin/sleep", nullptr, nullptr, sleep_argv, environ), 0);
  const test::HostSnapshot host;
  const SandboxResult r = runSandboxed(python(substituted(substituted(R"(
import os, signal
for target in (os.getppid(), 1, -1, 0, @HOST@, @SENTINEL@):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError:
        pass
print("still here")
)",
                                                                      "HOST", std::to_string(getpid())),
                                                          "SENTINEL", std::to_string(sentinel))));
  // As its namespace's init it survives its own kill(-1)/kill(0); without the namespace they end it.
  EXPECT_TRUE(r.outcome == SandboxOutcome::Exited || r.outcome == SandboxOutcome::Crashed) << r.stderr_text;
  int status = 0;
  EXPECT_EQ(waitpid(sentinel, &status, WNOHANG), 0) << "the host's other process was killed";
  expectNothingLeft(r);
  host.expectUnchanged();
  kill(sentinel, SIGKILL);
  waitpid(sentinel, &status, 0);
}

// Megabytes of stdin to a program that closes it at once: the host's write fails (EPIPE)
// without a SIGPIPE reaching the host; one that reads all of it gets all of it.
TEST(Sandbox, LargeStdinReadOrRefused) {
  SandboxRequest request = python("import os\nos.close(0)\nprint('closed')\n");
  request.stdin_text.assign(8 << 20, 'x');
  SandboxResult r = runSandboxed(request);
  EXPECT_EQ(r.outcome, SandboxOutcome::Exited) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "closed\n");
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  request.program = "import sys\nprint(len(sys.stdin.read()))\n";
  r = runSandboxed(request);
  EXPECT_EQ(r.stdout_text, std::to_string(8 << 20) + "\n");
}

// A host thread reaping any child (waitpid(-1)) may take the run's status before the runner
// does: the run then fails at once with an Error (or, if the runner was first, has its status)
// instead of waiting for a child that is gone until the deadline.
TEST(Sandbox, AHostReapingEveryChildFailsTheRunAtOnce) {
  std::atomic<bool> stop{false};
  std::thread reaper([&stop] {
    while (!stop) {
      int status = 0;
      waitpid(-1, &status, WNOHANG);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  SandboxRequest request;
  request.interpreter = "/bin/sh";
  request.program_name = "main.sh";
  request.program = "sleep 0.2\nexit 3\n";
  const auto start = std::chrono::steady_clock::now();
  try {
    const SandboxResult r = runSandboxed(request);
    EXPECT_EQ(r.outcome, SandboxOutcome::Exited);
    EXPECT_EQ(r.exit_code, 3);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reaped elsewhere"), std::string::npos) << e.what();
  }
  stop = true;
  reaper.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST(Sandbox, SegfaultIsACrash) {
  const SandboxResult r = runSandboxed(python("import ctypes\nctypes.string_at(0)\n"));
  EXPECT_EQ(r.outcome, SandboxOutcome::Crashed);
  EXPECT_EQ(r.signal, SIGSEGV);
}

TEST(Sandbox, TwoHundredRunsLeakNothing) {
  const test::HostSnapshot host;
  const std::string marker = uniqueMarker();
  SandboxRequest request;
  request.interpreter = "/bin/sh";  // a fast interpreter: the runs' count, not Python's start-up, is tested
  request.program_name = "main.sh";
  request.program = "echo " + marker + "\n";
  for (int i = 0; i < 200; ++i) {
    const SandboxResult r = runSandboxed(request);
    ASSERT_EQ(r.outcome, SandboxOutcome::Exited) << "run " << i << ": " << r.stderr_text;
    ASSERT_EQ(r.stdout_text, marker + "\n");
    ASSERT_FALSE(std::filesystem::exists(r.temp_dir));
  }
  EXPECT_TRUE(test::processesWith(marker).empty());
  host.expectUnchanged();
}

// Runs from several threads at once, one of them a fork bomb: the others still pass (each run
// has its own uid, so the bomb's processes do not count against their process limit).
TEST(Sandbox, ConcurrentRunsBesideAForkBomb) {
  const test::HostSnapshot host;
  std::atomic<int> passed{0};
  std::thread bomb([] {
    runSandboxed(python("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", 2));
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&passed, t] {
      for (int i = 0; i < 4; ++i) {
        SandboxRequest request = python(
            "import os\npid = os.fork()\nif pid == 0:\n    print(int(input()) * 2, flush=True)\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\n");
        request.stdin_text = std::to_string(t * 100 + i);
        const SandboxResult r = runSandboxed(request);
        if (r.outcome == SandboxOutcome::Exited && r.stdout_text == std::to_string(2 * (t * 100 + i)) + "\n") ++passed;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  bomb.join();
  EXPECT_EQ(passed.load(), 12);
  host.expectUnchanged();
}

TEST(Sandbox, SetupErrorsThrow) {
  SandboxRequest request = python("print(1)");
  request.interpreter = "/no/such/interpreter";
  EXPECT_THROW(runSandboxed(request), Error);
  request = python("print(1)");
  request.limits.wall_seconds = 0;
  EXPECT_THROW(runSandboxed(request), Error);
  request = python("print(1)");
  request.program_name = "../escape.py";
  EXPECT_THROW(runSandboxed(request), Error);
  if (geteuid() != 0) return;
  // An interpreter only root may reach: the run's uid cannot exec it, and the error says why.
  test::TempDir hidden;
  std::filesystem::copy_file("/bin/true", hidden.file("true"));
  request = python("print(1)");
  request.interpreter = hidden.file("true");
  try {
    runSandboxed(request);
    ADD_FAILURE() << "ran an interpreter in a 0700 root folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("execve failed: Permission denied (the sandbox runs it as uid"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace sandbox_tests
