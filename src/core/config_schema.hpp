#pragma once
// SectionSchema — one config section declared once: each key's name, type, bounds, unit (or the
// names of its choice), one line of meaning and, from the section type's own initialiser, its
// default; and the checks that span keys, by name. The same declaration reads the YAML
// (YamlReader: file:line, key, given and allowed in every error) and writes the section's table
// in docs/configuration.md (config_doc.hpp).
#include <array>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/config_doc.hpp"
#include "astraflow/core/enum_names.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow::detail {

// How a bound reads in the docs: "1–64", "1–2^24" (a power of two from 2^16), "≥ 1" (any other
// upper bound at or past `kUnbounded*` is left out), numbers in their shortest form ("0.05",
// "3e-06").
inline constexpr std::int64_t kUnboundedInt = std::int64_t{1} << 20;
inline constexpr double kUnboundedNumber = 1e6;
std::string rangeText(std::int64_t min, std::int64_t max);
std::string rangeText(double min, double max);
std::string numberText(double v);
// "unit, range, note" without the empty parts.
std::string allowedText(const char* unit, const std::string& range, const char* note);
// An enum's names as the docs list them: `a\|b\|c`.
template <class E, std::size_t N>
std::string namesText(const std::array<EnumName<E>, N>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "\\|") + std::string(n.name);
  return "`" + out + "`";
}

template <class S>
class SectionSchema {
 public:
  using Check = std::function<void(YamlReader&, const S&)>;
  // A key's default as the docs show it, from the section's default values.
  using Shown = std::function<std::string(const S&)>;

  explicit SectionSchema(std::string name) : name_(std::move(name)) {}

  // An integer in [min, max]; `note` adds to the allowed column (e.g. "0 = none").
  template <class I>
  SectionSchema& integer(const char* key, I S::*member, std::int64_t min, std::int64_t max, const char* unit,
                         const char* meaning, const char* note = "") {
    if (!std::in_range<I>(min) || !std::in_range<I>(max))
      throw std::logic_error("config schema: " + name_ + "." + key + "'s bounds do not fit its type");
    add(
        key, "integer", [member](const S& d) { return "`" + std::to_string(d.*member) + "`"; },
        allowedText(unit, rangeText(min, max), note), meaning, std::to_string(min), std::to_string(max),
        [=](YamlReader& r, S& s) {
          s.*member = static_cast<I>(r.getInt(key, static_cast<std::int64_t>(s.*member), min, max, unit));
        });
    return *this;
  }
  SectionSchema& number(const char* key, double S::*member, double min, double max, const char* unit,
                        const char* meaning, const char* note = "") {
    add(
        key, "number", [member](const S& d) { return "`" + numberText(d.*member) + "`"; },
        allowedText(unit, rangeText(min, max), note), meaning, numberText(min), numberText(max),
        [=](YamlReader& r, S& s) { s.*member = r.getDouble(key, s.*member, min, max); });
    return *this;
  }
  // A string; `shown_default` for a default the section type does not hold (derived at run time).
  SectionSchema& text(const char* key, std::string S::*member, const char* allowed, const char* meaning,
                      const char* shown_default = nullptr) {
    Shown shown = [member](const S& d) { return (d.*member).empty() ? std::string("empty") : "`" + d.*member + "`"; };
    if (shown_default) shown = fixed(shown_default);
    add(key, "string", std::move(shown), allowed, meaning,
        [=](YamlReader& r, S& s) { s.*member = r.getString(key, s.*member); });
    return *this;
  }
  // A string whose fallback depends on keys read before it (`run.output_dir`: from the name).
  SectionSchema& textFrom(const char* key, std::string S::*member, std::function<std::string(const S&)> fallback,
                          const char* allowed, const char* meaning, const char* shown_default) {
    add(key, "string", fixed(shown_default), allowed, meaning,
        [=](YamlReader& r, S& s) { s.*member = r.getString(key, fallback(s)); });
    return *this;
  }
  SectionSchema& boolean(const char* key, bool S::*member, const char* meaning) {
    add(
        key, "bool", [member](const S& d) { return std::string(d.*member ? "`true`" : "`false`"); }, "", meaning,
        [=](YamlReader& r, S& s) { s.*member = r.getBool(key, s.*member); });
    return *this;
  }
  // A key read its own way (a device request, an optional mapping), documented as given.
  SectionSchema& custom(const char* key, const char* type, std::string shown_default, std::string allowed,
                        const char* meaning, std::function<void(YamlReader&, S&)> read) {
    add(key, type, fixed(std::move(shown_default)), std::move(allowed), meaning, std::move(read));
    return *this;
  }
  // The same, its default shown from the section's default values (a member of a member).
  SectionSchema& custom(const char* key, const char* type, Shown shown, std::string allowed, const char* meaning,
                        std::function<void(YamlReader&, S&)> read) {
    add(key, type, std::move(shown), std::move(allowed), meaning, std::move(read));
    return *this;
  }
  // A nested mapping declared by its own schema; its keys (named under this one's, "trainer.loss.kind",
  // with defaults from this section's member) and checks are listed in this section's table.
  template <class Sub>
  SectionSchema& nested(const char* key, Sub S::*member, const SectionSchema<Sub>& sub) {
    docs_.push_back([key, member, sub](const std::string& prefix, const S& defaults, SectionDoc& out) {
      const SectionDoc d = sub.doc(prefix + "." + key, defaults.*member);
      out.keys.insert(out.keys.end(), d.keys.begin(), d.keys.end());
      for (const auto& rule : d.rules) out.rules.push_back({std::string(key) + "." + rule.name, rule.text});
    });
    steps_.push_back([key, member, sub](YamlReader& r, S& s) { sub.read(r.child(key), s.*member); });
    return *this;
  }
  // A member's keys read at this section's level ("environment.train" fills the environment's
  // dataset options), declared by the member's own schema: its keys and checks are listed here.
  template <class Sub>
  SectionSchema& merged(Sub S::*member, const SectionSchema<Sub>& sub) {
    if (sub.hasFinalRules())
      throw std::logic_error("config schema: " + name_ + " merges a schema with final rules, which it would not run");
    docs_.push_back([member, sub](const std::string& prefix, const S& defaults, SectionDoc& out) {
      const SectionDoc d = sub.doc(prefix, defaults.*member);
      out.keys.insert(out.keys.end(), d.keys.begin(), d.keys.end());
      out.rules.insert(out.rules.end(), d.rules.begin(), d.rules.end());
    });
    steps_.push_back([member, sub](YamlReader& r, S& s) { sub.readKeys(r, s.*member); });
    return *this;
  }
  // A choice: one of the enum's names (core/enum_names.hpp).
  template <class E, std::size_t N>
  SectionSchema& choice(const char* key, E S::*member, const std::array<EnumName<E>, N>& names, const char* meaning) {
    add(
        key, "string", [member, names](const S& d) { return "`" + std::string(enumName(names, d.*member)) + "`"; },
        namesText(names), meaning, [=](YamlReader& r, S& s) { s.*member = r.getEnum(key, s.*member, names); });
    return *this;
  }
  // The last declared key's default as the docs show it, where the section holds a stand-in
  // (`-1`: another key's value is taken).
  SectionSchema& defaultShown(std::string text) {
    docs_.back() = [doc = std::move(docs_.back()), text = std::move(text)](const std::string& prefix, const S& d,
                                                                           SectionDoc& out) {
      doc(prefix, d, out);
      out.keys.back().default_value = text;
    };
    return *this;
  }
  // A check over several keys, run after the keys declared before it are read (declared first
  // thing after a discriminating key, it refuses keys that do not go with its value before
  // they are read; declared last, it sees them all): `check` calls YamlReader::fail with the
  // key it blames and why.
  SectionSchema& rule(const char* name, std::string text, Check check) {
    addRuleDoc(name, std::move(text));
    steps_.push_back([check = std::move(check)](YamlReader& r, S& s) { check(r, s); });
    return *this;
  }

  // A check run once every key is read and none unknown is left (one that blames other
  // sections: an unknown key here is reported first, as the user's likelier mistake).
  SectionSchema& finalRule(const char* name, std::string text, Check check) {
    addRuleDoc(name, std::move(text));
    final_.push_back(std::move(check));
    return *this;
  }

  // Reads the section's keys into `s` (absent keys keep what `s` holds), applies the checks and
  // refuses keys the schema does not declare.
  void read(YamlReader r, S& s) const {
    readKeys(r, s);
    r.finish();
    for (const auto& check : final_) check(r, s);
  }
  // The same without refusing other keys: for keys read at a parent's level (merged).
  void readKeys(YamlReader& r, S& s) const {
    for (const auto& step : steps_) step(r, s);
  }

  // The section's table: keys named under `name`, defaults as `defaults` holds them.
  SectionDoc doc(const std::string& name, const S& defaults) const {
    SectionDoc out{name, {}, {}};
    for (const auto& d : docs_) d(name, defaults, out);
    return out;
  }
  SectionDoc doc() const { return doc(name_, S{}); }
  bool hasFinalRules() const { return !final_.empty(); }
  // The keys declared here, by their own names ("retries", "loss.kind").
  std::vector<std::string> keyNames() const {
    std::vector<std::string> names;
    for (const auto& k : doc().keys) names.push_back(k.key.substr(name_.size() + 1));
    return names;
  }

 private:
  void addRuleDoc(const char* name, std::string text) {
    docs_.push_back([name, text = std::move(text)](const std::string&, const S&, SectionDoc& out) {
      out.rules.push_back({name, text});
    });
  }
  static Shown fixed(std::string text) {
    return [text = std::move(text)](const S&) { return text; };
  }
  void add(const char* key, const char* type, Shown shown, std::string allowed, const char* meaning,
           std::function<void(YamlReader&, S&)> read) {
    add(key, type, std::move(shown), std::move(allowed), meaning, "", "", std::move(read));
  }
  void add(const char* key, const char* type, Shown shown, std::string allowed, const char* meaning, std::string min,
           std::string max, std::function<void(YamlReader&, S&)> read) {
    docs_.push_back([=](const std::string& prefix, const S& defaults, SectionDoc& out) {
      out.keys.push_back({prefix + "." + key, type, shown(defaults), allowed, meaning, min, max});
    });
    steps_.push_back(std::move(read));
  }

  std::string name_;
  // In declaration order: each key's (or nested section's, or check's) part of the docs, and
  // each key's (or nested section's) reader and each check.
  std::vector<std::function<void(const std::string&, const S&, SectionDoc&)>> docs_;
  std::vector<std::function<void(YamlReader&, S&)>> steps_;
  std::vector<Check> final_;  // finalRule's checks, in declaration order
};

}  // namespace astraflow::detail
