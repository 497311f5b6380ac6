#pragma once
// The `workflow` section's schema (src/core/workflow_config.cpp); private to src/core.
#include "astraflow/core/config.hpp"
#include "astraflow/core/config_doc.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow {

// Reads `workflow` into cfg.workflow and checks it against cfg's policies, layout, environment
// and router (which it defaults to by_role for a multi-agent workflow). Needs those parsed first.
void parseWorkflow(detail::YamlReader r, Config& cfg);

// The section's table and checks in docs/configuration.md, from the schema parseWorkflow reads with.
SectionDoc workflowDoc();

}  // namespace astraflow
