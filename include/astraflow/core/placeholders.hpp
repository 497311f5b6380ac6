// Placeholders in the commands a user gives for servers the run starts ({port}, {model},
// {local_rank}): one substitution and one test, shared by the config checks, OpenEnv servers and
// launched inference servers.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace astraflow {

// Every `placeholder` in `text` replaced by `value` (a value holding the placeholder is not expanded again).
inline std::string withPlaceholder(std::string text, const std::string& placeholder, const std::string& value) {
  for (std::size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at + value.size()))
    text.replace(at, placeholder.size(), value);
  return text;
}

// Whether any argument of `argv` holds `placeholder`.
inline bool holdsPlaceholder(const std::vector<std::string>& argv, const std::string& placeholder) {
  return std::any_of(argv.begin(), argv.end(),
                     [&](const std::string& a) { return a.find(placeholder) != std::string::npos; });
}

}  // namespace astraflow
