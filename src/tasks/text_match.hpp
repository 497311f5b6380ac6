#pragma once
// Small text helpers the built-in environments share when they read a policy's action.
#include <string_view>

namespace astraflow::detail {

// `s` without leading and trailing spaces, tabs and newlines.
inline std::string_view trimSpaces(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\n");
  return s.substr(first, last - first + 1);
}

}  // namespace astraflow::detail
