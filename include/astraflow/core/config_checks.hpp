#pragma once
// Checks of config values whose allowed set a higher module owns: environment names (tasks) and
// data-algorithm plug-ins (dataflow). Core parses the YAML but includes neither module, so each
// owner registers its check here (registerTaskConfigChecks, registerDataflowConfigChecks) and
// parseConfig applies what is registered. Every program linked with the `astraflow` target
// registers both before main (src/run/config_checks.cpp); a config parsed with a check missing
// is refused with std::logic_error rather than accepted unchecked.
#include <functional>
#include <string>
#include <vector>

namespace astraflow {

struct DataflowSection;

struct ConfigChecks {
  // The allowed values of environment.name.
  std::function<std::vector<std::string>()> environment_names;
  // Throws ConfigError naming the key of a plug-in whose kind or parameters are not allowed.
  std::function<void(const DataflowSection&)> dataflow_plugins;
};

// The process's registered checks (set before main, read by parseConfig).
ConfigChecks& configChecks();

}  // namespace astraflow
