// elastic.mode external: asking the maintainer command or reading the target file (maintainer.hpp).
#include "dataflow/maintainer.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/process_runner.hpp"

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
  // Through the process runner (posix_spawn-style clone + exec, nothing allocated in the child):
  // fork() in this multithreaded MPI rank could deadlock the child on a lock another thread held.
  // The report path reaches the command as "$1", never spliced into the shell text.
  detail::ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", e.command + " \"$1\"", "astraflow-maintainer", report_path};
  spec.wall_seconds = e.command_timeout_s;
  spec.output_bytes = std::size_t{1} << 16;
  detail::ProcessResult run;
  try {
    run = detail::runProcess(spec);
  } catch (const Error& error) {
    why = fmt::format("the maintainer command could not be started: {}", error.what());
    return std::nullopt;
  }
  if (run.timed_out) {
    why = fmt::format("the maintainer command did not answer within {:.0f} s (elastic.command_timeout_s); killed",
                      e.command_timeout_s);
    return std::nullopt;
  }
  if (run.output_limit) {
    why = "the maintainer command wrote more than 64 KiB to stdout; killed";
    return std::nullopt;
  }
  if (run.signal != 0 || run.exit_code != 0) {
    why = fmt::format("the maintainer command failed ({} {})", run.signal == 0 ? "exit" : "signal",
                      run.signal == 0 ? run.exit_code : run.signal);
    return std::nullopt;
  }
  return parseTarget(run.out, e, "the maintainer command", why);
}

std::optional<int> readTargetFile(const ElasticSection& e, const std::string& path, std::string& why) {
  std::ifstream in(path);
  if (!in) return std::nullopt;  // no target written: nothing to do, nothing to report
  std::stringstream text;
  text << in.rdbuf();
  return parseTarget(text.str(), e, fmt::format("target file {}", path).c_str(), why);
}

}  // namespace astraflow::dataflow_detail
