// The tokenizer.json decoders (ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace): each rewrites the list of
// token strings as `tokenizers`' decode_chain does.
#include "text/decoders.hpp"

#include <optional>

#include "text/byte_level.hpp"
#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xNN>" token as tokenizers reads it: six bytes, and u8::from_str_radix(NN,
// 16), which also takes a '+' before a single digit.
std::optional<unsigned char> fallbackByte(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return std::nullopt;
  const int hi = hexDigit(token[3]), lo = hexDigit(token[4]);
  if (token[3] == '+' && lo >= 0) return static_cast<unsigned char>(lo);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

bool validUtf8(std::string_view bytes) { return unicode::utf8Lossy(bytes) == bytes; }

std::vector<char32_t> codePoints(std::string_view text) {
  std::vector<char32_t> out;
  for (std::size_t pos = 0; pos < text.size();) out.push_back(unicode::nextCodePoint(text, pos));
  return out;
}

}  // namespace

void ByteLevelDecoder::apply(std::vector<std::string>& tokens) const {
  std::string bytes, token_bytes;
  for (const std::string& token : tokens) {
    token_bytes.clear();
    bool all_symbols = true;
    for (std::size_t pos = 0; pos < token.size() && all_symbols;) {
      const auto b = symbolByte(unicode::nextCodePoint(token, pos));
      if (b)
        token_bytes += static_cast<char>(*b);
      else
        all_symbols = false;
    }
    bytes += all_symbols ? token_bytes : token;
  }
  tokens.assign(1, unicode::utf8Lossy(bytes));
}

void ByteFallbackDecoder::apply(std::vector<std::string>& tokens) const {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;  // the bytes of the <0xNN> tokens since the last other token
  std::size_t run_tokens = 0;
  auto flush = [&] {
    if (run_tokens == 0) return;
    if (validUtf8(run)) {
      out.push_back(run);
    } else {
      for (std::size_t i = 0; i < run_tokens; ++i) out.emplace_back(kReplacementCharacter);
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& token : tokens) {
    if (const auto byte = fallbackByte(token)) {
      run += static_cast<char>(*byte);
      ++run_tokens;
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  tokens = std::move(out);
}

void FuseDecoder::apply(std::vector<std::string>& tokens) const {
  std::string all;
  for (const std::string& token : tokens) all += token;
  tokens.assign(1, std::move(all));
}

void StripDecoder::apply(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) {
    const std::vector<char32_t> chars = codePoints(token);
    std::size_t start = 0;
    while (start < start_ && start < chars.size() && chars[start] == content_) ++start;
    std::size_t stop = chars.size();
    for (std::size_t i = 0; i < stop_ && stop > start && chars[stop - 1] == content_; ++i) --stop;
    std::string out;
    for (std::size_t i = start; i < stop; ++i) unicode::appendUtf8(out, chars[i]);
    token = std::move(out);
  }
}

void ReplaceDecoder::apply(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) {
    std::string out;
    replaceMatches(*pattern_, token, content_, out);
    token = std::move(out);
  }
}

void MetaspaceDecoder::apply(std::vector<std::string>& tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const bool drop = i == 0 && prepend_ != PrependScheme::Never;
    std::string out;
    for (char32_t c : codePoints(tokens[i])) {
      if (c != replacement_)
        unicode::appendUtf8(out, c);
      else if (!drop)
        out += ' ';
    }
    tokens[i] = std::move(out);
  }
}

}  // namespace astraflow::text
