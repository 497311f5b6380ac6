#pragma once
// A config choice's names: one table per enum, read by the YAML reader (YamlReader::getEnum, which
// refuses any other name and lists these) and by whatever prints the choice back (summary.json,
// error messages). A choice is an enum from the moment it is parsed; no code compares its name.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace astraflow {

template <class E>
struct EnumName {
  const char* name;
  E value;
};

// The name of `value` in its table ("?" for a value the table lacks, which a table that lists
// every enumerator never gives).
template <class E, std::size_t N>
constexpr const char* enumName(const std::array<EnumName<E>, N>& table, E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// The value named `name` in its table; nullopt for a name the table lacks.
template <class E, std::size_t N>
constexpr std::optional<E> enumByName(const std::array<EnumName<E>, N>& table, std::string_view name) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

}  // namespace astraflow
