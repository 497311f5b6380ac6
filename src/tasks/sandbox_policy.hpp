#pragma once
// The kernel policies the sandbox hands to the process runner: the seccomp filter that refuses
// network sockets, and the Landlock ruleset that limits what the program may read and write.
// Both are built in the parent, before the clone (the child only installs them).
#include <string>
#include <vector>

#include "astraflow/tasks/process_runner.hpp"

namespace astraflow::detail {

// A classic-BPF seccomp program: socket() and socketpair() fail with EPERM for every family
// but AF_UNIX, io_uring_setup/enter/register fail with EPERM (io_uring can open sockets
// without calling socket()); a system call of another ABI (x32, or i386 through int 0x80)
// kills the process. nullptr on an architecture it is not written for (then only the network
// namespace keeps the program off the network).
const sock_fprog* socketFilter();

// The Landlock ABI version of the running kernel, 0 when Landlock is not available.
int landlockAbi();

struct LandlockPaths {
  std::vector<std::string> read_only;  // folders (or files) it may read and execute below
  std::vector<std::string> devices;    // files it may read and write (/dev/null …)
  std::string writable;                // the one folder it may change
};

// A ruleset allowing those accesses and no other file access; with ABI ≥ 4 also no TCP bind
// or connect, with ABI ≥ 6 no signal to and no abstract unix socket of a process outside it.
// Invalid when Landlock is not available. Paths that do not exist are left out.
UniqueFd landlockRuleset(const LandlockPaths& paths);

}  // namespace astraflow::detail
