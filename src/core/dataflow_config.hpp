#pragma once
// Parsing of the `dataflow` config section (rings, staleness, the data-algorithm plug-ins),
// split from config.cpp. Private to src/core.
#include "astraflow/core/config.hpp"
#include "core/config_schema.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow::detail {

// Throws ConfigError naming the key; plug-in kinds and parameters are checked by the checks
// the dataflow module registered (core/config_checks.hpp).
void parseDataflow(YamlReader r, DataflowSection& df);

// Its keys, declared once (config_schema.hpp).
const SectionSchema<DataflowSection>& dataflowSchema();

}  // namespace astraflow::detail
