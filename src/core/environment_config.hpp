#pragma once
// The `environment` section's schema (src/core/environment_schema.cpp) and parser
// (src/core/environment_config.cpp); private to src/core.
#include "astraflow/core/config.hpp"
#include "core/config_schema.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow::detail {

// The section's schema (environment_schema.cpp) and the parts it is built from.
const SectionSchema<DatasetTaskOptions>& datasetSchema();
const SectionSchema<RewardSpec>& rewardSchema();
const SectionSchema<ToolOptions>& toolSchema();
const SectionSchema<OpenEnvOptions>& openEnvSchema();
const SectionSchema<EnvironmentOptions>& environmentSchema();

// Reads `environment` into cfg.environment. Needs cfg.run and cfg.policies parsed first: the
// `dataset` environment takes the run's seed and the policies' Hugging Face folders.
void parseEnvironment(YamlReader r, Config& cfg);

// Checks what needs later sections: an evaluation (eval.problems > 0) of the `dataset`
// environment needs held-out rows.
void checkEnvironment(const Config& cfg);

}  // namespace astraflow::detail
