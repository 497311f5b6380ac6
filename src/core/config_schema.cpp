// How a declared config section reads in docs/configuration.md: bounds and defaults as text, the
// section's table and checks, and the generated regions of the doc rewritten from them.
#include "core/config_schema.hpp"

#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include "astraflow/core/error.hpp"

namespace astraflow {

namespace detail {

std::string rangeText(std::int64_t min, std::int64_t max) {
  // A large power of two is a real bound (2^24 slots); past 2^20 otherwise, a guard against overflow.
  if (max >= (1 << 16) && (max & (max - 1)) == 0) {
    int k = 0;
    while ((std::int64_t{1} << k) < max) ++k;
    return fmt::format("{}–2^{}", min, k);
  }
  return max >= kUnboundedInt ? fmt::format("≥ {}", min) : fmt::format("{}–{}", min, max);
}

std::string numberText(double v) { return fmt::format("{}", v); }

std::string rangeText(double min, double max) {
  return max >= kUnboundedNumber ? "≥ " + numberText(min) : numberText(min) + "–" + numberText(max);
}

std::string allowedText(const char* unit, const std::string& range, const char* note) {
  std::string out;
  for (const std::string& part : {std::string(unit), range, std::string(note)}) {
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  }
  return out;
}

}  // namespace detail

std::string markdownSection(const SectionDoc& section) {
  std::ostringstream os;
  os << "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& k : section.keys) {
    os << "| `" << k.key << "` | " << k.type << " | " << k.default_value << " | " << k.allowed << " | " << k.meaning
       << " |\n";
  }
  if (!section.rules.empty()) {
    os << "\nChecks across keys (an error names the key it blames):\n\n";
    for (const auto& r : section.rules) os << "- `" << r.name << "`: " << r.text << "\n";
  }
  return os.str();
}

std::string regenerateConfigDoc(const std::string& doc) {
  constexpr std::string_view kOpen = "<!-- schema: ", kClose = "<!-- /schema -->";
  std::map<std::string, SectionDoc> sections;
  for (auto& s : configSchemaDocs()) {
    const std::string name = s.name;
    if (!sections.emplace(name, std::move(s)).second)
      throw Error("config doc: section '" + name + "' is declared twice");
  }
  std::set<std::string> written;
  std::istringstream in(doc);
  std::ostringstream out;
  std::string raw;
  bool skipping = false;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    // Markers are compared without trailing blanks (a CRLF file, a space after the marker);
    // every other line is kept as it is.
    std::string line = raw;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (skipping) {
      if (line.rfind(kOpen, 0) == 0)
        throw Error(fmt::format("config doc, line {}: a generated region opened inside another", number));
      if (line != kClose) continue;
      skipping = false;
    } else if (line.rfind(kOpen, 0) == 0 && line.size() > kOpen.size() + 4 && line.ends_with(" -->")) {
      const std::string name = line.substr(kOpen.size(), line.size() - kOpen.size() - 4);
      const auto it = sections.find(name);
      if (it == sections.end())
        throw Error(
            fmt::format("config doc, line {}: a generated region for '{}', which no schema declares", number, name));
      if (!written.insert(name).second)
        throw Error(fmt::format("config doc, line {}: a second generated region for '{}'", number, name));
      out << line << "\n" << markdownSection(it->second);
      skipping = true;
      continue;
    } else {
      out << raw << "\n";
      continue;
    }
    out << line << "\n";  // the closing marker
  }
  if (skipping) throw Error("config doc: a generated region has no closing " + std::string(kClose));
  for (const auto& [name, section] : sections) {
    if (!written.count(name))
      throw Error(
          fmt::format("config doc: no generated region for section '{}' (a line '{}{} -->')", name, kOpen, name));
  }
  return out.str();
}

}  // namespace astraflow
