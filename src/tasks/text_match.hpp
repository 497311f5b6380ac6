#pragma once
// Small text helpers the built-in environments share when they read a policy's action.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace astraflow::detail {

// `s` without leading and trailing spaces, tabs and newlines.
inline std::string_view trimSpaces(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\n");
  return s.substr(first, last - first + 1);
}

// `text` cut to `limit` bytes (at a UTF-8 character boundary), saying how much was cut: what an
// environment shows the policy of a tool's reply or an observation.
inline std::string capped(std::string text, std::uint64_t limit) {
  if (text.size() <= limit) return text;
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const std::size_t dropped = text.size() - cut;
  text.resize(cut);
  return text + fmt::format("\n[{} more bytes cut]", dropped);
}

}  // namespace astraflow::detail
