// bench_sandbox [N] [INTERPRETER]: the sandbox's cost per run. N sandboxed runs of a trivial
// passing program (`pass`) and N direct runs of `INTERPRETER -c pass` (posix_spawn + waitpid,
// no limits, no namespaces), interleaved in blocks of 10 so both see the same machine load,
// after a warm-up of 5 each. Prints one JSON line: runs/s of each, the ratio, and the
// milliseconds the sandbox adds to a run. profiling/bench_sandbox.sh runs it.
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "astraflow/tasks/sandbox.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

void sandboxed(const std::string& interpreter) {
  astraflow::SandboxRequest request;
  request.interpreter = interpreter;
  request.program = "pass\n";
  const astraflow::SandboxResult r = astraflow::runSandboxed(request);
  if (r.outcome != astraflow::SandboxOutcome::Exited || r.exit_code != 0) {
    std::fprintf(stderr, "bench_sandbox: the sandboxed run failed: %s\n", r.stderr_text.c_str());
    std::exit(1);
  }
}

void direct(const std::string& interpreter) {
  std::string arg0 = interpreter, arg1 = "-c", arg2 = "pass";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = 0;
  int status = 0;
  if (posix_spawn(&pid, interpreter.c_str(), nullptr, nullptr, argv, environ) != 0 || waitpid(pid, &status, 0) < 0 ||
      !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_sandbox: %s -c pass failed\n", interpreter.c_str());
    std::exit(1);
  }
}

template <class Run>
double seconds(Run run, int times) {
  const auto start = Clock::now();
  for (int i = 0; i < times; ++i) run();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string interpreter = argc > 2 ? argv[2] : "/usr/bin/python3";
  if (n < 10) {
    std::fprintf(stderr, "usage: bench_sandbox [N >= 10] [INTERPRETER]\n");
    return 2;
  }
  seconds([&] { sandboxed(interpreter); }, 5);
  seconds([&] { direct(interpreter); }, 5);
  double in_sandbox = 0, spawned = 0;
  int runs = 0;
  for (; runs + 10 <= n; runs += 10) {
    in_sandbox += seconds([&] { sandboxed(interpreter); }, 10);
    spawned += seconds([&] { direct(interpreter); }, 10);
  }
  const double sandbox_rate = runs / in_sandbox, spawn_rate = runs / spawned;
  std::printf(
      "{\"runs\": %d, \"interpreter\": \"%s\", \"sandbox_runs_per_s\": %.1f, \"spawn_runs_per_s\": %.1f, "
      "\"ratio_spawn_over_sandbox\": %.2f, \"sandbox_ms_added_per_run\": %.2f}\n",
      runs, interpreter.c_str(), sandbox_rate, spawn_rate, spawn_rate / sandbox_rate,
      1e3 * (in_sandbox - spawned) / runs);
  return 0;
}
