#pragma once
// A child that serves on a port until its owner goes: an OpenEnv environment server a rollout
// rank starts itself (env_openenv.cpp). Its stdout and stderr are appended to a log file, not
// piped: a server logs at every request, and a pipe nobody drains would stop it once full.
// Started like the process runner's children (process_spawn.hpp: its own session, fds above 2
// closed, PR_SET_PDEATHSIG), cloned from the process's spawner thread so that it dies with the
// process, not with the thread that asked for it (spawner_thread.hpp).
#include <sys/types.h>

#include <memory>
#include <string>

#include "astraflow/tasks/process_runner.hpp"

namespace astraflow::detail {

class ServerProcess {
 public:
  // Starts `spec` (executable, argv, env, cwd) with stdin from /dev/null and its output appended
  // to `log_path`. Throws ChildStartError when a set-up step or the execve fails, Error when the
  // log cannot be opened or the child cannot be cloned.
  ServerProcess(const ProcessSpec& spec, const std::string& log_path);
  // Kills its process group and reaps it.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ended();
  pid_t pid() const;
  const std::string& logPath() const { return log_path_; }
  // The last `bytes` of its log, for the error when it fails.
  std::string logTail(std::size_t bytes = 4096) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string log_path_;
};

}  // namespace astraflow::detail
