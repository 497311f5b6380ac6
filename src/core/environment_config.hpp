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

// eval.sets: [{name, path (a path or a list), problems, samples}] (environment_schema.cpp, beside
// the file keys whose paths it reads the same way).
void readEvalSets(YamlReader& r, std::vector<EvalSetSpec>& sets);

// What needs later sections, after eval.sets is copied into environment.dataset: an evaluation
// (eval.problems > 0) of a dataset environment needs held-out rows; eval.sets needs a dataset
// environment and sampled answers where a set asks for several; run.keep_best needs evaluation
// rounds at checkpointed versions.
void checkEnvironment(const Config& cfg);

}  // namespace astraflow::detail
