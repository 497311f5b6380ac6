// The registry of environments by name (STYLE §4): one row per built-in environment.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <stdexcept>

#include "astraflow/core/config_checks.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "tasks/builtin_environments.hpp"

namespace astraflow {
namespace {

struct EnvironmentEntry {
  std::string_view name;
  std::unique_ptr<Environment> (*make)(const EnvironmentOptions&);
};

constexpr std::array<EnvironmentEntry, 6> kEnvironments = {{
    {"arithmetic", &detail::makeArithmeticEnvironment},
    {"search", &detail::makeSearchEnvironment},
    {"dataset", &detail::makeDatasetEnvironment},
    {"code_interpreter", &detail::makeCodeInterpreterEnvironment},
    {"doc_search", &detail::makeDocSearchEnvironment},
    {"openenv", &detail::makeOpenEnvEnvironment},
}};

}  // namespace

std::vector<McpTool> Environment::servedTools() const { return {}; }

std::uint64_t Environment::heldOutSetId(std::size_t set, std::uint64_t k) const {
  if (set != 0) throw Error(fmt::format("environment {}: no evaluation set {} (it has only held_out)", name(), set));
  return heldOutId(k);
}

std::unique_ptr<Environment> makeEnvironment(const EnvironmentOptions& options) {
  for (const auto& entry : kEnvironments) {
    if (entry.name == options.name) return entry.make(options);
  }
  throw std::invalid_argument(fmt::format("environment.name: unknown environment '{}'; registered: {}", options.name,
                                          fmt::join(environmentNames(), ", ")));
}

std::vector<std::string> environmentNames() {
  std::vector<std::string> names;
  for (const auto& entry : kEnvironments) names.emplace_back(entry.name);
  return names;
}

void registerTaskConfigChecks() { configChecks().environment_names = &environmentNames; }

}  // namespace astraflow
