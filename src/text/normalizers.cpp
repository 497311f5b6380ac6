// The tokenizer.json normalisers not defined in normalizers.hpp: Lowercase (full lowercase mappings), Strip
// (White_Space off either end) and Replace (a pattern's matches replaced), as `tokenizers` applies them.
#include "text/normalizers.hpp"

namespace astraflow::text {

void LowercaseNormalizer::apply(std::string& text) const {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) unicode::appendLowercase(out, unicode::nextCodePoint(text, pos));
  text = std::move(out);
}

void StripNormalizer::apply(std::string& text) const {
  std::size_t begin = 0, end = text.size();
  if (left_) {
    while (begin < end) {
      std::size_t next = begin;
      if (!unicode::isWhitespace(unicode::nextCodePoint(text, next))) break;
      begin = next;
    }
  }
  if (right_) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      std::size_t next = start;
      if (!unicode::isWhitespace(unicode::nextCodePoint(text, next))) break;
      end = start;
    }
  }
  text = text.substr(begin, end - begin);
}

void ReplaceNormalizer::apply(std::string& text) const {
  std::string out;
  out.reserve(text.size());
  replaceMatches(*pattern_, text, content_, out);
  text = std::move(out);
}

}  // namespace astraflow::text
