#pragma once
// GPT-2's byte → printable code point map, in which byte-level BPE vocabularies are written:
// printable Latin-1 bytes stand for themselves, the other 68 move to U+0100 + n in byte order.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace astraflow::text {

// The UTF-8 spelling of byte b's symbol.
const std::string& byteSymbol(std::uint8_t b);

// The byte a symbol stands for, if `c` is one of the 256.
std::optional<std::uint8_t> symbolByte(char32_t c);

// `bytes` spelt in symbols (what the ByteLevel pre-tokenizer hands the BPE model).
void appendByteSymbols(std::string_view bytes, std::string& out);

}  // namespace astraflow::text
