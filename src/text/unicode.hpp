#pragma once
// The Unicode facts the tokenizer.json pipeline needs, from ICU (the same character database
// Oniguruma and Rust's unicode crates are built from): UTF-8 decoding, the classes the split
// patterns name (\p{L}, \p{N}, \s = White_Space), the NF* normalisations, and the lossy UTF-8
// decoding `tokenizers` applies to decoded bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace astraflow::unicode {

enum class CharClass : std::uint8_t { Letter, Number, Space, Other };

// The class of a code point: Letter = general category L*, Number = N*, Space = the
// White_Space property, Other = everything else (marks, punctuation, symbols, controls).
CharClass classOf(char32_t c);

// Decodes the code point starting at text[pos] and advances pos. Throws Error naming the byte
// offset when the text is not valid UTF-8 (overlong forms, surrogates, truncated sequences).
char32_t nextCodePoint(std::string_view text, std::size_t& pos);

// Throws Error naming the first bad byte when `text` is not valid UTF-8.
void requireUtf8(std::string_view text);

void appendUtf8(std::string& out, char32_t c);

// U+FFFD for each maximal ill-formed subpart (the Unicode recommendation Rust's
// String::from_utf8_lossy follows), everything else as is.
std::string utf8Lossy(std::string_view bytes);

enum class NormalForm : std::uint8_t { NFC, NFD, NFKC, NFKD };

// `text` in the normal form (unchanged and uncopied when it is in it already: the quick check
// passes pure ASCII and most real text).
void normalize(NormalForm form, std::string& text);

// A word character of Unicode regexes (\w: Alphabetic, marks, decimal digits, connector
// punctuation, join controls), which `tokenizers` tests for added tokens' single_word rule.
bool isWordChar(char32_t c);

}  // namespace astraflow::unicode
