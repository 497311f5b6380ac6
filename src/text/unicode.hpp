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

// Rust's char::is_whitespace (the White_Space property): WhitespaceSplit, Strip.
inline bool isWhitespace(char32_t c) { return classOf(c) == CharClass::Space; }

// Rust's char::is_numeric (general category N*): the Digits pre-tokenizer.
inline bool isNumeric(char32_t c) { return classOf(c) == CharClass::Number; }

// The Punctuation pre-tokenizer's test: ASCII punctuation (which includes $+<=>^`|~), or
// punctuation (P*) by the Unicode 8.0 tables of the `unicode_categories` crate tokenizers uses:
// punctuation assigned since is not punctuation there, and the two characters that were but
// changed category since (U+166D, U+111C9) still are.
bool isPunctuation(char32_t c);

// Appends the full lowercase mapping of one code point (Rust's char::to_lowercase, context-free:
// U+0130 → "i̇", every Σ → σ), which the Lowercase normaliser applies character by character.
void appendLowercase(std::string& out, char32_t c);

// A word character of Unicode regexes (\w: Alphabetic, marks, decimal digits, connector
// punctuation, join controls), which `tokenizers` tests for added tokens' single_word rule.
bool isWordChar(char32_t c);

}  // namespace astraflow::unicode
