// splitPieces: hand-written matchers for the Qwen2 / Qwen3, Llama-3 and GPT-2 split regexes of byte-level BPE
// tokenizers, giving the pieces Oniguruma's find-all gives; splitRuleOf recognises a pattern by its exact text.
#include "text/split_rules.hpp"

namespace astraflow::text {
namespace {

using unicode::CharClass;

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One text decoded: code points, their classes, and byte offsets (offsets[n] = text size).
class Cursor {
 public:
  explicit Cursor(const SplitScratch& s) : cp_(s.code_points), cls_(s.classes) {}
  std::size_t size() const { return cp_.size(); }
  char32_t at(std::size_t i) const { return cp_[i]; }
  CharClass cls(std::size_t i) const { return cls_[i]; }
  bool is(std::size_t i, CharClass c) const { return i < cp_.size() && cls_[i] == c; }
  bool newline(std::size_t i) const { return i < cp_.size() && (cp_[i] == U'\r' || cp_[i] == U'\n'); }
  std::size_t runOf(std::size_t i, CharClass c) const {
    while (i < cp_.size() && cls_[i] == c) ++i;
    return i;
  }

 private:
  const std::vector<char32_t>& cp_;
  const std::vector<CharClass>& cls_;
};

// 's 't 're 've 'm 'll 'd at i; `fold` is the (?i:) group: ASCII case, and U+017F (long s),
// whose case folding is 's'.
std::size_t contraction(const Cursor& t, std::size_t i, bool fold) {
  if (t.at(i) != U'\'' || i + 1 >= t.size()) return 0;
  auto lower = [&](std::size_t k) -> char32_t {
    const char32_t c = t.at(k);
    if (!fold) return c;
    if (c >= U'A' && c <= U'Z') return c - U'A' + U'a';
    if (c == U'\u017F') return U's';
    return c;
  };
  const char32_t a = lower(i + 1);
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return i + 2;
  if (i + 2 >= t.size()) return 0;
  const char32_t b = lower(i + 2);
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return i + 3;
  return 0;
}

// The end of a whitespace run at i under `\s*[\r\n]+ | \s+(?!\S) | \s+` (Qwen2/Llama-3) or
// `\s+(?!\S) | \s+` (GPT-2, newlines == false).
std::size_t whitespace(const Cursor& t, std::size_t i, bool newlines) {
  const std::size_t end = t.runOf(i, CharClass::Space);
  if (newlines) {
    // \s* backtracks to the run's last CR or LF, which [\r\n]+ then takes.
    for (std::size_t k = end; k > i; --k)
      if (t.newline(k - 1)) return k;
  }
  if (end == t.size()) return end;   // (?!\S) holds at the end of the text
  if (end - i >= 2) return end - 1;  // give back one space, which the next piece starts with
  return end;
}

// (?i:contractions)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
std::size_t gpt4Match(const Cursor& t, std::size_t i, std::size_t max_digits) {
  if (const std::size_t e = contraction(t, i, true)) return e;
  const CharClass c = t.cls(i);
  if (c == CharClass::Letter) return t.runOf(i, CharClass::Letter);
  if (c != CharClass::Number && !t.newline(i) && t.is(i + 1, CharClass::Letter))
    return t.runOf(i + 1, CharClass::Letter);
  if (c == CharClass::Number) {
    std::size_t e = i;
    while (e < t.size() && e - i < max_digits && t.cls(e) == CharClass::Number) ++e;
    return e;
  }
  std::size_t start = i;
  if (t.at(i) == U' ' && t.is(i + 1, CharClass::Other)) start = i + 1;
  if (t.cls(start) == CharClass::Other) {
    std::size_t e = t.runOf(start, CharClass::Other);
    while (t.newline(e)) ++e;
    return e;
  }
  return whitespace(t, i, true);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::size_t gpt2Match(const Cursor& t, std::size_t i) {
  if (const std::size_t e = contraction(t, i, false)) return e;
  std::size_t start = i;
  if (t.at(i) == U' ' && i + 1 < t.size() && t.cls(i + 1) != CharClass::Space) start = i + 1;
  const CharClass c = t.cls(start);
  if (c != CharClass::Space) return t.runOf(start, c);
  return whitespace(t, i, false);
}

}  // namespace

std::optional<SplitRule> splitRuleOf(std::string_view pattern) {
  if (pattern == kQwen2Pattern) return SplitRule::Qwen2;
  if (pattern == kLlama3Pattern) return SplitRule::Llama3;
  if (pattern == kGpt2Pattern) return SplitRule::Gpt2;
  return std::nullopt;
}

std::string_view splitPattern(SplitRule rule) {
  switch (rule) {
    case SplitRule::Qwen2: return kQwen2Pattern;
    case SplitRule::Llama3: return kLlama3Pattern;
    case SplitRule::Gpt2: break;
  }
  return kGpt2Pattern;
}

void splitPieces(SplitRule rule, std::string_view text, std::vector<std::string_view>& pieces, SplitScratch& scratch) {
  scratch.code_points.clear();
  scratch.classes.clear();
  scratch.offsets.clear();
  for (std::size_t pos = 0; pos < text.size();) {
    scratch.offsets.push_back(pos);
    const char32_t c = unicode::nextCodePoint(text, pos);
    scratch.code_points.push_back(c);
    scratch.classes.push_back(unicode::classOf(c));
  }
  scratch.offsets.push_back(text.size());
  const Cursor t(scratch);
  for (std::size_t i = 0; i < t.size();) {
    std::size_t end = 0;
    switch (rule) {
      case SplitRule::Qwen2: end = gpt4Match(t, i, 1); break;
      case SplitRule::Llama3: end = gpt4Match(t, i, 3); break;
      case SplitRule::Gpt2: end = gpt2Match(t, i); break;
    }
    pieces.push_back(text.substr(scratch.offsets[i], scratch.offsets[end] - scratch.offsets[i]));
    i = end;
  }
}

}  // namespace astraflow::text
