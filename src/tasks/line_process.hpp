#pragma once
// A child that stays running and answers one line for each line written to it: the persistent
// reward worker (reward_worker.cpp) talks to the user's verifier through it. Started like the
// process runner's children (process_spawn.hpp: its own session and process group, fds above 2
// closed), owned until reaped: the destructor kills its group and reaps it.
#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "astraflow/tasks/process_runner.hpp"

namespace astraflow::detail {

// The host's environment with `extra` set (replacing the host's values of those names) and
// PYTHONUNBUFFERED=1: a Python program's print() to a pipe is block-buffered otherwise, and its
// answer would sit in its buffer until the caller's timeout.
std::vector<std::string> lineProcessEnvironment(const std::vector<std::pair<std::string, std::string>>& extra = {});

// A child started here is cloned from the process's spawner thread (spawner_thread.hpp): its
// PR_SET_PDEATHSIG follows that thread, so it dies with the process, not with the thread that
// asked for it (a worker pool's threads come and go).
class LineProcess {
 public:
  // Starts spec.executable with spec.argv, spec.env, spec.cwd and spec.isolation (stdin_text,
  // wall_seconds and output_bytes are not used: each exchange has its own). Throws
  // ChildStartError when a set-up step or the execve fails, Error when it cannot be cloned.
  explicit LineProcess(const ProcessSpec& spec);
  ~LineProcess();
  LineProcess(const LineProcess&) = delete;
  LineProcess& operator=(const LineProcess&) = delete;

  enum class Outcome {
    Answered,  // `line` holds its answer (without the newline)
    TimedOut,  // no whole line within the time: the process must not be used again
    Ended,     // it exited or was killed before answering
    TooLong,   // its answer passed max_line bytes without a newline: must not be used again
  };
  struct Exchange {
    Outcome outcome = Outcome::Ended;
    std::string line;
  };

  // Writes `request` and a newline, then reads its stdout up to the next newline, within
  // `seconds`. What it printed before the request (a stray line) is dropped. Its stderr is read
  // meanwhile (so a chatty program never blocks on a full pipe) and its tail kept.
  Exchange exchange(std::string_view request, double seconds, std::size_t max_line);
  // For protocols with messages that need no answer, or several answers (JSON-RPC): `send`
  // writes a line (Answered once written), `readLine` reads the next whole line of stdout
  // (lines read past are kept for the next readLine; exchange drops them).
  Exchange send(std::string_view line, double seconds);
  Exchange readLine(double seconds, std::size_t max_line);

  // Whether it has ended (without reaping it).
  bool ended();
  // The last few KiB it wrote to stderr, for the log when it fails.
  std::string stderrTail() const;
  pid_t pid() const;

 private:
  Exchange pump(std::string_view line, bool want_line, double seconds, std::size_t max_line);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow::detail
