#pragma once
// Parsing of the `layout` section (src/core/layout_config.cpp); private to src/core.
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow {

// A name a config gives a run, site, policy or pool: 1-64 characters of [A-Za-z0-9_-].
bool isIdentifier(const std::string& s);
// Refuses `value` of `key` (naming what is allowed) unless it is such a name.
void requireIdentifier(const detail::YamlReader& r, const std::string& key, const std::string& value);

// Reads `layout` from the top-level reader. Needs the policy list to check references, so it is
// parsed after `policies`.
std::vector<LayoutEntry> parseLayout(detail::YamlReader& top, const std::vector<PolicySection>& policies,
                                     const std::string& source);

}  // namespace astraflow
