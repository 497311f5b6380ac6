#pragma once
// Parsing of the `workflow` section (src/core/workflow_config.cpp); private to src/core.
#include "astraflow/core/config.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow {

// Reads `workflow` into cfg.workflow and checks it against cfg's policies, layout, environment
// and router (which it defaults to by_role for a multi-agent workflow). Needs those parsed first.
void parseWorkflow(detail::YamlReader r, Config& cfg);

}  // namespace astraflow
