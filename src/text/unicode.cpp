// The Unicode facts of the tokenizer pipeline, from ICU: character classes (tabled for the BMP), UTF-8 decoding and
// encoding, utf8Lossy, NF* normalisation, lowercasing and punctuation.
#include "text/unicode.hpp"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <array>
#include <memory>

#include "astraflow/core/error.hpp"

namespace astraflow::unicode {
namespace {

CharClass classFromIcu(char32_t c) {
  const auto cp = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(cp, UCHAR_WHITE_SPACE)) return CharClass::Space;
  const std::uint32_t mask = U_GET_GC_MASK(cp);
  if (mask & U_GC_L_MASK) return CharClass::Letter;
  if (mask & U_GC_N_MASK) return CharClass::Number;
  return CharClass::Other;
}

// The Basic Multilingual Plane's classes, looked up once: the split patterns ask for every
// code point's class, and an ICU call per character would dominate pre-tokenisation.
const std::array<CharClass, 0x10000>& bmpClasses() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<CharClass, 0x10000>>();
    for (char32_t c = 0; c < 0x10000; ++c) (*t)[c] = classFromIcu(c);
    return t;
  }();
  return *table;
}

bool punctuationFromIcu(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  if (c == 0x166D || c == 0x111C9) return true;  // Po in Unicode 8.0, So and Mn now
  const auto cp = static_cast<UChar32>(c);
  if ((U_GET_GC_MASK(cp) & U_GC_P_MASK) == 0) return false;
  UVersionInfo age;
  u_charAge(cp, age);
  return age[0] <= 8;  // assigned by Unicode 8.0
}

const std::array<bool, 0x10000>& bmpPunctuation() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<bool, 0x10000>>();
    for (char32_t c = 0; c < 0x10000; ++c) (*t)[c] = punctuationFromIcu(c);
    return t;
  }();
  return *table;
}

const icu::Normalizer2& normalizer(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::NFC: n = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::NFD: n = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::NFKC: n = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::NFKD: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || n == nullptr)
    throw Error(fmt::format("ICU has no normaliser data ({})", u_errorName(status)));
  return *n;
}

// Length of the well-formed sequence that starts with `lead`, or 0 for a byte that never
// starts one; and the range the second byte must lie in (the Unicode table of well-formed
// UTF-8, which excludes overlong forms, surrogates and code points past U+10FFFF).
struct LeadInfo {
  int length;
  unsigned char second_lo, second_hi;
};
LeadInfo leadInfo(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// The number of bytes of a well-formed sequence at text[pos], or -(bytes of the maximal
// ill-formed subpart) when there is none.
int sequenceAt(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const LeadInfo info = leadInfo(lead);
  if (info.length == 1) return 1;
  if (info.length == 0) return -1;
  int have = 1;
  for (int k = 1; k < info.length; ++k) {
    if (pos + k >= text.size()) return -have;
    const auto b = static_cast<unsigned char>(text[pos + k]);
    const bool ok = k == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -have;
    ++have;
  }
  return info.length;
}

char32_t decodeAt(std::string_view text, std::size_t pos, int length) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (length == 1) return b0;
  char32_t c = b0 & (0xFF >> (length + 1));
  for (int k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  return c;
}

}  // namespace

CharClass classOf(char32_t c) {
  if (c < 0x10000) return bmpClasses()[c];
  return classFromIcu(c);
}

char32_t nextCodePoint(std::string_view text, std::size_t& pos) {
  const int length = sequenceAt(text, pos);
  if (length < 0) throw Error(fmt::format("text is not valid UTF-8 (byte {} of {})", pos, text.size()));
  const char32_t c = decodeAt(text, pos, length);
  pos += static_cast<std::size_t>(length);
  return c;
}

void requireUtf8(std::string_view text) {
  for (std::size_t pos = 0; pos < text.size();) nextCodePoint(text, pos);
}

void appendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t pos = 0; pos < bytes.size();) {
    const int length = sequenceAt(bytes, pos);
    if (length > 0) {
      out.append(bytes.substr(pos, static_cast<std::size_t>(length)));
      pos += static_cast<std::size_t>(length);
    } else {
      out += "\xEF\xBF\xBD";
      pos += static_cast<std::size_t>(-length);
    }
  }
  return out;
}

void normalize(NormalForm form, std::string& text) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return;
  const icu::Normalizer2& n = normalizer(form);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
  if (n.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<std::int32_t>(text.size()));
  n.normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(fmt::format("Unicode normalisation failed ({})", u_errorName(status)));
  text = std::move(out);
}

bool isPunctuation(char32_t c) { return c < 0x10000 ? bmpPunctuation()[c] : punctuationFromIcu(c); }

void appendLowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return;
  }
  UChar src[2];
  std::int32_t length = 0;
  U16_APPEND_UNSAFE(src, length, static_cast<UChar32>(c));
  UChar lower[8];  // the longest full lowercase mapping is 3 code points
  UErrorCode status = U_ZERO_ERROR;
  const std::int32_t n = u_strToLower(lower, 8, src, length, "", &status);
  if (U_FAILURE(status))
    throw Error(fmt::format("ICU cannot lowercase U+{:04X} ({})", static_cast<std::uint32_t>(c), u_errorName(status)));
  for (std::int32_t i = 0; i < n;) {
    UChar32 d;
    U16_NEXT(lower, i, n, d);
    appendUtf8(out, static_cast<char32_t>(d));
  }
}

bool isWordChar(char32_t c) {
  const auto cp = static_cast<UChar32>(c);
  return u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL) ||
         (U_GET_GC_MASK(cp) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

}  // namespace astraflow::unicode
