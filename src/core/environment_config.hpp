#pragma once
// Parsing of the `environment` section (src/core/environment_config.cpp); private to src/core.
#include "astraflow/core/config.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow::detail {

// Reads `environment` into cfg.environment. Needs cfg.run and cfg.policies parsed first: the
// `dataset` environment takes the run's seed and the policies' Hugging Face folders.
void parseEnvironment(YamlReader r, Config& cfg);

// Checks what needs later sections: an evaluation (eval.problems > 0) of the `dataset`
// environment needs held-out rows.
void checkEnvironment(const Config& cfg);

}  // namespace astraflow::detail
