#pragma once
// Starting the child of the process runner (process_runner.hpp): what the child does between
// clone and execve, and the clone itself.
//
// The child is started with clone(CLONE_VM | CLONE_VFORK) on a stack of its own, as glibc's
// posix_spawn does: the host (an MPI + LibTorch process of many threads and a large address
// space) has no page tables copied, and the calling thread waits until the child has called
// execve or given up. Until then the child shares the host's memory, so it runs only system
// calls over the plan prepared before the clone — no allocation, no lock — and uses the raw
// setgroups/setresgid/setresuid calls: glibc's wrappers would ask every thread of the *host* to
// change its credentials.
#include <sys/types.h>

#include <array>

#include "astraflow/tasks/process_runner.hpp"

namespace astraflow::detail {

// The child's set-up steps, in order; the one that failed is named in the Error.
enum class ChildStep {
  None,
  Signals,
  Session,
  Stdio,
  Cwd,
  Rlimit,
  NoNewPrivs,
  Landlock,
  Credentials,
  DeathSignal,
  Seccomp,
  CloseFds,
  Exec
};

// What the failed step was called, for the Error.
const char* childStepName(ChildStep step);

// Written by the child into the parent's memory (CLONE_VM); read once clone has returned.
struct ChildReport {
  ChildStep step = ChildStep::None;
  int error = 0;
};

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: stay where the host is
  std::array<int, 3> stdio;
  const ChildIsolation* isolation;
  ChildReport* report;
};

struct ClonedChild {
  pid_t pid = -1;
  bool namespaces = false, user_namespace = false;  // the namespaces asked for were granted (and how)
};

// Clones the child that carries out `plan` and execs (the calling thread waits for that); with
// plan.isolation->namespaces it tries new namespaces first and, when the kernel refuses them,
// clones without. Throws astraflow::Error when clone fails; a set-up step that fails is in
// *plan.report (and the child has exited 127).
ClonedChild cloneChild(ChildPlan& plan);

}  // namespace astraflow::detail
