#pragma once
// The config's documentation as its schema declares it: for each section declared as a schema
// (src/core/section_schemas.cpp, role_schemas.cpp, dataflow_config.cpp), every key's type, default, what is allowed and
// one line of meaning, and the checks that span keys. docs/configuration.md holds these as generated tables
// (`astraflow config-doc --write docs/configuration.md` rewrites them; test_config fails when
// the file in the repository differs from what the schema generates).
#include <string>
#include <vector>

namespace astraflow {

struct KeyDoc {
  std::string key;   // the full path: "weights.mode"
  std::string type;  // integer, number, string, bool, or what a custom key names
  std::string default_value;
  std::string allowed;  // unit and bounds, or the allowed names
  std::string meaning;
  std::string min, max;  // an integer's or number's bounds as YAML values (empty for other keys)
};

// A check over several keys of a section, by name (the error it gives names the key).
struct RuleDoc {
  std::string name;
  std::string text;
};

struct SectionDoc {
  std::string name;
  std::vector<KeyDoc> keys;
  std::vector<RuleDoc> rules;
};

// The sections declared as schemas so far, in docs/configuration.md's order.
std::vector<SectionDoc> configSchemaDocs();

// One section's generated region: its table, then its checks.
std::string markdownSection(const SectionDoc& section);

// `doc` with each generated region — from a line `<!-- schema: NAME -->` to a line
// `<!-- /schema -->` — holding its section's markdownSection. Throws Error naming a declared
// section without its region, or a region naming no declared section.
std::string regenerateConfigDoc(const std::string& doc);

}  // namespace astraflow
