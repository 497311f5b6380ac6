#pragma once
// Strict, path-aware reading of a YAML mapping into typed values. Each read marks its key as
// known; finish() turns any key left over into an error that lists the allowed keys. Every
// error names file:line, the full key path, what was given and what is allowed.
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "astraflow/core/enum_names.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow::detail {

class YamlReader {
 public:
  YamlReader(YAML::Node node, std::string path, const std::string& source);

  bool has(const std::string& key) const;
  std::int64_t getInt(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max,
                      const char* unit = "");
  std::int64_t requireInt(const std::string& key, std::int64_t min, std::int64_t max, const char* unit = "");
  double getDouble(const std::string& key, double fallback, double min, double max);
  bool getBool(const std::string& key, bool fallback);
  std::string getString(const std::string& key, const std::string& fallback);
  std::string requireString(const std::string& key);
  std::string getChoice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  std::string requireChoice(const std::string& key, const std::vector<std::string>& allowed);
  // A choice parsed into its enum by the enum's name table (core/enum_names.hpp).
  template <class E, std::size_t N>
  E getEnum(const std::string& key, E fallback, const std::array<EnumName<E>, N>& table) {
    std::vector<std::string> names;
    for (const auto& entry : table) names.emplace_back(entry.name);
    return enumByName(table, getChoice(key, enumName(table, fallback), names)).value_or(fallback);
  }
  template <class E, std::size_t N>
  E requireEnum(const std::string& key, const std::array<EnumName<E>, N>& table) {
    std::vector<std::string> names;
    for (const auto& entry : table) names.emplace_back(entry.name);
    return *enumByName(table, requireChoice(key, names));  // requireChoice refuses any other name
  }
  std::vector<std::string> requireStringList(const std::string& key);

  // A nested mapping (absent: an empty reader) or a sequence of nodes.
  YamlReader child(const std::string& key);
  std::vector<YAML::Node> requireSequence(const std::string& key);

  // The raw node of an optional key (marked known); nullopt when absent or null.
  std::optional<YAML::Node> raw(const std::string& key) { return valueOf(key); }

  // Errors on every key that no get*/require*/child call asked for.
  void finish();

  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  std::string keyPath(const std::string& key) const;
  int line() const;
  int lineOf(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  [[noreturn]] void failAt(int line, const std::string& key_path, const std::string& what) const;

 private:
  std::optional<YAML::Node> valueOf(const std::string& key);  // marks known; nullopt when absent or null
  std::int64_t toInt(const YAML::Node& v, const std::string& key, std::int64_t min, std::int64_t max,
                     const char* unit) const;

  YAML::Node node_;
  std::string path_;
  std::string source_;
  std::set<std::string> known_;
};

// The scalar text of a node for messages ("a mapping", "a list" for the others).
std::string describe(const YAML::Node& node);

}  // namespace astraflow::detail
