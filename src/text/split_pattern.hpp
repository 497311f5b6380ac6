#pragma once
// How tokenizers cuts text by a pattern, for the Split-like pre-tokenizers and the Replace
// normaliser and decoder: a Pattern lists the spans of a text, matches and the text between
// them in order (tokenizers' Pattern::find_matches), and a SplitBehavior decides what becomes of
// the matches (tokenizers' NormalizedString::split with its SplitDelimiterBehavior).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/onig_regex.hpp"

namespace astraflow::text {

struct Span {
  std::size_t start = 0, end = 0;
  bool match = false;
};

class Pattern {
 public:
  virtual ~Pattern() = default;
  // Appends the spans of `text` (valid UTF-8), in order and covering it; empty matches are spans
  // of their own; an empty text is one empty non-match span.
  virtual void spans(std::string_view text, std::vector<Span>& out) const = 0;
};

// A {"Regex": ...} or {"String": ...} pattern, compiled once by Oniguruma.
class RegexPattern final : public Pattern {
 public:
  RegexPattern(std::string_view pattern, OnigPattern::Syntax syntax) : regex_(pattern, syntax) {}
  void spans(std::string_view text, std::vector<Span>& out) const override;

 private:
  OnigPattern regex_;
};

// Every code point that passes `test` is a match of its own: tokenizers' character patterns
// (whitespace, punctuation, digits, the Metaspace replacement).
class CharPattern final : public Pattern {
 public:
  explicit CharPattern(std::function<bool(char32_t)> test) : test_(std::move(test)) {}
  void spans(std::string_view text, std::vector<Span>& out) const override;

 private:
  std::function<bool(char32_t)> test_;
};

// The Whitespace pre-tokenizer's \w+|[^\w\s]+, which tokenizers runs with Rust's `regex` crate,
// not Oniguruma: its \w is Unicode's word class (unicode::isWordChar, which takes the joiners
// U+200C/U+200D that Oniguruma's \w does not). Maximal runs of word characters, and of
// characters that are neither word nor White_Space, are the matches.
class WordRunPattern final : public Pattern {
 public:
  void spans(std::string_view text, std::vector<Span>& out) const override;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The behaviour tokenizer.json spells `name` ("Isolated", "MergedWithNext", ...), if any.
std::optional<SplitBehavior> splitBehaviorOf(std::string_view name);

// The pieces NormalizedString::split keeps of `spans` (a Pattern's, `invert` swapping matches and
// the text between them), as byte ranges appended to `out`; empty pieces are dropped, as
// tokenizers drops them. `spans` is reused as scratch.
void splitSpans(std::vector<Span>& spans, SplitBehavior behavior, bool invert, std::vector<ByteRange>& out);

// `text` with every match of `pattern` replaced by `content` (NormalizedString::replace and the
// Replace decoder; an empty match inserts `content`).
void replaceMatches(const Pattern& pattern, std::string_view text, std::string_view content, std::string& out);

}  // namespace astraflow::text
