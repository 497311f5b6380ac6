#pragma once
// Runs the real h5dump (path from ASTRAFLOW_H5DUMP, set by CMake; else from PATH) on a file and
// returns what it printed, stdout and stderr together.
#include <cstdio>
#include <cstdlib>
#include <string>

namespace astraflow::test {

inline std::string runH5dump(const std::string& path, int* exit_status) {
  const char* env = std::getenv("ASTRAFLOW_H5DUMP");
  const std::string h5dump = env != nullptr && *env != '\0' ? env : "h5dump";
  std::string output;
  FILE* pipe = popen(("'" + h5dump + "' '" + path + "' 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *exit_status = -1;
    return output;
  }
  char buffer[4096];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  *exit_status = pclose(pipe);
  return output;
}

}  // namespace astraflow::test
