// PluginSpec's parameter accessors (number, integer, allowOnly): a data-algorithm plug-in's parameters read within
// their bounds, with a ConfigError naming the key for a value out of range or an unknown parameter.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

double PluginSpec::number(const std::string& param, double fallback, double low, double high) const {
  auto it = params.find(param);
  if (it == params.end()) return fallback;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || errno != 0 || !(v >= low && v <= high)) {
    throw ConfigError(
        fmt::format("{}.{}: given '{}'; allowed: a number in [{}, {}]", key, param, it->second, low, high));
  }
  return v;
}

std::int64_t PluginSpec::integer(const std::string& param, std::int64_t fallback, std::int64_t low,
                                 std::int64_t high) const {
  auto it = params.find(param);
  if (it == params.end()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end != '\0' || errno != 0 || v < low || v > high) {
    throw ConfigError(
        fmt::format("{}.{}: given '{}'; allowed: an integer in [{}, {}]", key, param, it->second, low, high));
  }
  return v;
}

void PluginSpec::allowOnly(const std::vector<std::string>& known) const {
  for (const auto& [k, v] : params) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      throw ConfigError(fmt::format("{}.{}: unknown parameter of plug-in '{}'; allowed: {}", key, k, kind,
                                    known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
    }
  }
}

}  // namespace astraflow
