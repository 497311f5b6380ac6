// GPT-2's byte ↔ symbol tables (byteSymbol, symbolByte, appendByteSymbols), built once: the alphabet byte-level BPE
// vocabularies are written in.
#include "text/byte_level.hpp"

#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

bool printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

struct Tables {
  std::array<std::string, 256> symbols;
  std::array<std::int16_t, 512> byte_of_code;  // code points of symbols are < 0x144; -1 for none
  Tables() {
    byte_of_code.fill(-1);
    int moved = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t code = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + moved++);
      unicode::appendUtf8(symbols[static_cast<std::size_t>(b)], code);
      byte_of_code[code] = static_cast<std::int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byteSymbol(std::uint8_t b) { return tables().symbols[b]; }

std::optional<std::uint8_t> symbolByte(char32_t c) {
  if (c >= 512) return std::nullopt;
  const std::int16_t b = tables().byte_of_code[c];
  if (b < 0) return std::nullopt;
  return static_cast<std::uint8_t>(b);
}

void appendByteSymbols(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (char ch : bytes) out += t.symbols[static_cast<unsigned char>(ch)];
}

}  // namespace astraflow::text
