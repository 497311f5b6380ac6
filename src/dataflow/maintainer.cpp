#include "dataflow/maintainer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

namespace astraflow::dataflow_detail {

namespace {

// The last non-empty line as a pool size within bounds.
std::optional<int> parseTarget(const std::string& text, const ElasticSection& e, const char* source, std::string& why) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) last = line;
  }
  if (last.empty() || last.size() > 9 || last.find_first_not_of("0123456789") != std::string::npos) {
    why = fmt::format("{} answered '{}', not a pool size", source, last.substr(0, 80));
    return std::nullopt;
  }
  const int target = std::stoi(last);
  if (target < e.g_min || target > e.g_max) {
    why = fmt::format("{} answered {}, outside [g_min {}, g_max {}]", source, target, e.g_min, e.g_max);
    return std::nullopt;
  }
  return target;
}

}  // namespace

std::optional<int> askMaintainer(const ElasticSection& e, const std::string& report_path, std::string& why) {
  int out[2];
  if (pipe(out) != 0) {
    why = "cannot create a pipe for the maintainer command";
    return std::nullopt;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    why = "cannot fork the maintainer command";
    return std::nullopt;
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a timeout kills whatever it started too
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const std::string cmd = e.command + " '" + report_path + "'";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(e.command_timeout_s);
  bool open = true, timed_out = false;
  while (open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out[0], POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 200))) > 0) {
      char buf[4096];
      const ssize_t n = read(out[0], buf, sizeof buf);
      if (n > 0) {
        if (text.size() < (1u << 16)) text.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        open = false;
      }
    }
  }
  close(out[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    why = fmt::format("the maintainer command did not answer within {:.0f} s (elastic.command_timeout_s); killed",
                      e.command_timeout_s);
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = fmt::format("the maintainer command failed ({} {})", WIFEXITED(status) ? "exit" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return std::nullopt;
  }
  return parseTarget(text, e, "the maintainer command", why);
}

std::optional<int> readTargetFile(const ElasticSection& e, const std::string& path, std::string& why) {
  std::ifstream in(path);
  if (!in) return std::nullopt;  // no target written: nothing to do, nothing to report
  std::stringstream text;
  text << in.rdbuf();
  return parseTarget(text.str(), e, fmt::format("target file {}", path).c_str(), why);
}

}  // namespace astraflow::dataflow_detail
