// YamlReader: strict, typed reads of one YAML mapping for the config parser; each error names file:line, the key
// path, what was given and what is allowed, and finish() refuses keys nobody read.
#include "core/yaml_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <limits>
#include <optional>

namespace astraflow::detail {

std::string describe(const YAML::Node& node) {
  if (!node || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return "'" + node.Scalar() + "'";
}

YamlReader::YamlReader(YAML::Node node, std::string path, const std::string& source)
    : node_(std::move(node)), path_(std::move(path)), source_(source) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    failAt(line(), path_.empty() ? "(top level)" : path_, "expected a mapping of keys, given " + describe(node_));
  }
}

std::string YamlReader::keyPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

int YamlReader::line() const {
  if (!node_) return 0;
  return node_.Mark().line >= 0 ? node_.Mark().line + 1 : 0;
}

int YamlReader::lineOf(const std::string& key) const {
  if (node_ && node_.IsMap()) {
    for (const auto& kv : node_) {
      if (kv.first.Scalar() == key) return kv.first.Mark().line + 1;
    }
  }
  return line();
}

void YamlReader::failAt(int at_line, const std::string& key_path, const std::string& what) const {
  if (at_line > 0) throw ConfigError(fmt::format("{}:{}: {}: {}", source_, at_line, key_path, what));
  throw ConfigError(fmt::format("{}: {}: {}", source_, key_path, what));
}

void YamlReader::fail(const std::string& key, const std::string& what) const {
  failAt(lineOf(key), keyPath(key), what);
}

bool YamlReader::has(const std::string& key) const {
  if (!node_ || !node_.IsMap()) return false;
  const YAML::Node& map = node_;
  return map[key].IsDefined() && !map[key].IsNull();
}

std::optional<YAML::Node> YamlReader::valueOf(const std::string& key) {
  known_.insert(key);
  if (!node_ || !node_.IsMap()) return std::nullopt;
  const YAML::Node& map = node_;  // const access never inserts the key
  YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  return v;
}

std::int64_t YamlReader::toInt(const YAML::Node& v, const std::string& key, std::int64_t min, std::int64_t max,
                               const char* unit) const {
  const std::string range = fmt::format("an integer in [{}, {}]{}{}", min, max, *unit ? " " : "", unit);
  if (!v.IsScalar()) fail(key, "given " + describe(v) + "; allowed: " + range);
  const std::string& s = v.Scalar();
  std::int64_t out = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) {
    fail(key, "given '" + s + "', not an integer; allowed: " + range);
  }
  if (out < min || out > max) fail(key, "given " + s + ", out of range; allowed: " + range);
  return out;
}

std::int64_t YamlReader::getInt(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max,
                                const char* unit) {
  const auto v = valueOf(key);
  return v ? toInt(*v, key, min, max, unit) : fallback;
}

std::int64_t YamlReader::requireInt(const std::string& key, std::int64_t min, std::int64_t max, const char* unit) {
  const auto v = valueOf(key);
  if (!v) fail(key, fmt::format("required key is missing; allowed: an integer in [{}, {}]", min, max));
  return toInt(*v, key, min, max, unit);
}

double YamlReader::getDouble(const std::string& key, double fallback, double min, double max) {
  const auto v = valueOf(key);
  if (!v) return fallback;
  const std::string range = fmt::format("a number in [{}, {}]", min, max);
  if (!v->IsScalar()) fail(key, "given " + describe(*v) + "; allowed: " + range);
  double out = 0;
  const std::string& s = v->Scalar();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) {
    fail(key, "given '" + s + "', not a number; allowed: " + range);
  }
  if (!(out >= min && out <= max)) fail(key, "given " + s + ", out of range; allowed: " + range);
  return out;
}

bool YamlReader::getBool(const std::string& key, bool fallback) {
  const auto v = valueOf(key);
  if (!v) return fallback;
  if (v->IsScalar()) {
    const std::string& s = v->Scalar();
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail(key, "given " + describe(*v) + "; allowed: true or false");
}

std::string YamlReader::getString(const std::string& key, const std::string& fallback) {
  const auto v = valueOf(key);
  if (!v) return fallback;
  if (!v->IsScalar()) fail(key, "given " + describe(*v) + "; allowed: a string");
  return v->Scalar();
}

std::string YamlReader::requireString(const std::string& key) {
  const auto v = valueOf(key);
  if (!v) fail(key, "required key is missing; allowed: a string");
  if (!v->IsScalar() || v->Scalar().empty()) {
    fail(key, "given " + describe(*v) + "; allowed: a non-empty string");
  }
  return v->Scalar();
}

static std::string joinChoices(const std::vector<std::string>& allowed) {
  return fmt::format("{}", fmt::join(allowed, "|"));
}

std::string YamlReader::getChoice(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& allowed) {
  const auto v = valueOf(key);
  if (!v) return fallback;
  if (v->IsScalar()) {
    for (const auto& a : allowed) {
      if (v->Scalar() == a) return a;
    }
  }
  fail(key, "given " + describe(*v) + "; allowed: " + joinChoices(allowed));
}

std::string YamlReader::requireChoice(const std::string& key, const std::vector<std::string>& allowed) {
  if (!valueOf(key)) fail(key, "required key is missing; allowed: " + joinChoices(allowed));
  return getChoice(key, "", allowed);
}

std::vector<std::string> YamlReader::requireStringList(const std::string& key) {
  const auto v = valueOf(key);
  if (!v) fail(key, "required key is missing; allowed: a list of strings");
  if (!v->IsSequence() || v->size() == 0) {
    fail(key, "given " + describe(*v) + "; allowed: a non-empty list of strings");
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].IsScalar()) {
      failAt((*v)[i].Mark().line + 1, fmt::format("{}[{}]", keyPath(key), i),
             "given " + describe((*v)[i]) + "; allowed: a string");
    }
    out.push_back((*v)[i].Scalar());
  }
  return out;
}

YamlReader YamlReader::child(const std::string& key) {
  const auto v = valueOf(key);
  if (v && !v->IsMap()) fail(key, "given " + describe(*v) + "; allowed: a mapping of keys");
  return YamlReader(v ? *v : YAML::Node(), keyPath(key), source_);
}

std::vector<YAML::Node> YamlReader::requireSequence(const std::string& key) {
  const auto v = valueOf(key);
  if (!v) fail(key, "required key is missing; allowed: a non-empty list");
  if (!v->IsSequence() || v->size() == 0) {
    fail(key, "given " + describe(*v) + "; allowed: a non-empty list");
  }
  return std::vector<YAML::Node>(v->begin(), v->end());
}

void YamlReader::finish() {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    if (known_.count(key)) continue;
    std::vector<std::string> allowed(known_.begin(), known_.end());
    failAt(kv.first.Mark().line + 1, keyPath(key),
           "unknown key; allowed keys here: " + fmt::format("{}", fmt::join(allowed, ", ")));
  }
}

}  // namespace astraflow::detail
