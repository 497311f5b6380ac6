#pragma once
// Running an untrusted program — code a policy wrote — in a separate, limited process: the
// `code` reward's engine (code_reward.hpp). What it guarantees and what it does not protect
// against: docs/tasks.md, "The sandbox".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace astraflow {

struct SandboxLimits {
  double cpu_seconds = 5;                            // RLIMIT_CPU per process, rounded up to whole seconds
  double wall_seconds = 10;                          // the run is killed at this deadline
  std::uint64_t memory_bytes = 512ULL << 20;         // RLIMIT_AS: address space per process
  std::uint64_t file_bytes = 16ULL << 20;            // RLIMIT_FSIZE: the largest file it may write
  int processes = 16;                                // RLIMIT_NPROC: its processes at once
  std::size_t output_bytes = std::size_t{64} << 10;  // stdout and stderr each; past it the run is killed
};

struct SandboxRequest {
  std::string interpreter = "/usr/bin/python3";  // a path, or a name looked up on the host's PATH
  std::vector<std::string> interpreter_args;     // before the program's file name
  std::string program;                           // the text written to <temp dir>/<program_name>
  std::string program_name = "main.py";
  std::string stdin_text;
  SandboxLimits limits;
  // Where Landlock is available the program reads only the system folders, the interpreter's
  // prefix and its temp dir; these are added (read-only).
  std::vector<std::string> read_paths;
};

enum class SandboxOutcome {
  Exited,       // it ended by itself, with exit_code (0 or not)
  Timeout,      // wall deadline, or its CPU limit
  MemoryLimit,  // the interpreter ran out of memory (Python's MemoryError as the last stderr line)
  OutputLimit,  // stdout or stderr past output_bytes: killed there
  Crashed,      // ended by a signal of its own (SIGSEGV, SIGABRT …)
};
// "exited", "timeout", "memory_limit", "output_limit", "crashed".
const char* sandboxOutcomeName(SandboxOutcome outcome);

// Which protections the run got (they depend on the kernel and on running as root).
struct SandboxIsolation {
  bool pid_namespace = false;      // its own PID namespace: killing it kills every descendant
  bool network_namespace = false;  // its own network namespace: no interface but a down loopback
  bool user_namespace = false;     // the two above through a user namespace (host not root)
  bool unprivileged_uid = false;   // run as a uid of its own, not the host's (host is root)
  bool seccomp = false;            // the socket filter
  bool landlock = false;           // the file-access ruleset
};

struct SandboxResult {
  SandboxOutcome outcome = SandboxOutcome::Crashed;
  int exit_code = -1;                    // the status it exited with; -1 when a signal ended it
  int signal = 0;                        // the signal that ended it; 0 when it exited
  std::string stdout_text, stderr_text;  // each at most output_bytes
  bool stdout_truncated = false, stderr_truncated = false;
  double wall_seconds = 0, cpu_seconds = 0;
  std::string temp_dir;  // where it ran; removed, with all the program left in it, before return
  SandboxIsolation isolation;
};

// Runs the program to its end. Throws astraflow::Error when the run cannot be set up (no such
// interpreter, no temp dir, the kernel refusing a step); never for what the program does.
// Thread-safe; the calling process is never signalled, left with a child, or left an fd.
SandboxResult runSandboxed(const SandboxRequest& request);

}  // namespace astraflow
