#pragma once
// The config sections declared as schemas (config_schema.hpp): each key once, read by
// parseConfig and written into docs/configuration.md by `astraflow config-doc`. Defined in
// section_schemas.cpp and role_schemas.cpp (rollout, trainer, the policies).
#include "astraflow/core/config.hpp"
#include "core/config_schema.hpp"

namespace astraflow::detail {

const SectionSchema<RunSection>& runSchema();
const SectionSchema<PolicySection>& policySchema();
const SectionSchema<ModelConfig>& modelSchema();
// layout[i] (layout_config.cpp) and its backend (backend_schema.cpp), its simulated keys from simulation_config.cpp.
const SectionSchema<LayoutEntry>& layoutEntrySchema();
const SectionSchema<RolloutBackendSpec>& backendSchema();
const SectionSchema<SimulatedBackendSpec>& simulatedSchema();
const SectionSchema<RolloutSection>& rolloutSchema();
const SectionSchema<TrainerSection>& trainerSchema();
const SectionSchema<SftSection>& sftSchema();
const SectionSchema<EvalSection>& evalSchema();
const SectionSchema<WeightsSection>& weightsSchema();
const SectionSchema<CrossSiteSection>& crossSiteSchema();
const SectionSchema<ElasticSection>& elasticSchema();
const SectionSchema<LocalSection>& localSchema();

// Readers shared by sections (environment_schema.cpp): a list of strings when `key` is given;
// `env`, a mapping NAME: value of variables for a server a rank starts.
void readList(YamlReader& r, const char* key, std::vector<std::string>& out);
std::vector<std::pair<std::string, std::string>> environmentVariables(YamlReader& r);

}  // namespace astraflow::detail
