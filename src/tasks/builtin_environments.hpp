#pragma once
// Factories of the environments that ship in-tree; the registry (environment_registry.cpp)
// is their only caller.
#include <memory>

#include "astraflow/tasks/environment.hpp"

namespace astraflow::detail {

// Each throws std::invalid_argument naming the `environment.<key>` option it rejects.
std::unique_ptr<Environment> makeArithmeticEnvironment(const EnvironmentOptions& options);
std::unique_ptr<Environment> makeSearchEnvironment(const EnvironmentOptions& options);
std::unique_ptr<Environment> makeDatasetEnvironment(const EnvironmentOptions& options);
std::unique_ptr<Environment> makeCodeInterpreterEnvironment(const EnvironmentOptions& options);
std::unique_ptr<Environment> makeDocSearchEnvironment(const EnvironmentOptions& options);
std::unique_ptr<Environment> makeOpenEnvEnvironment(const EnvironmentOptions& options);
// `dataset` with environment.tools.mcp: multi-turn with the MCP servers' tools only.
std::unique_ptr<Environment> makeDatasetToolEnvironment(const EnvironmentOptions& options);

}  // namespace astraflow::detail
