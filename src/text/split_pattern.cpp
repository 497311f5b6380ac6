// Pattern spans (RegexPattern, CharPattern, WordRunPattern), splitSpans for each SplitBehavior, and replaceMatches:
// how `tokenizers` cuts or rewrites text by a pattern, for Split, Replace and the character pre-tokenizers.
#include "text/split_pattern.hpp"

#include <algorithm>

#include "text/unicode.hpp"

namespace astraflow::text {

void RegexPattern::spans(std::string_view text, std::vector<Span>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  thread_local std::vector<ByteRange> matches;  // reused: no allocation per text
  matches.clear();
  regex_.findAll(text, matches);
  std::size_t prev = 0;
  for (const ByteRange& m : matches) {
    if (prev != m.start) out.push_back({prev, m.start, false});
    out.push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

void CharPattern::spans(std::string_view text, std::vector<Span>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  std::size_t last = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = pos;
    if (!test_(unicode::nextCodePoint(text, pos))) continue;
    if (last < start) out.push_back({last, start, false});
    out.push_back({start, pos, true});
    last = pos;
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

void WordRunPattern::spans(std::string_view text, std::vector<Span>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  enum class Kind { Word, Space, Other };
  auto kindOf = [](char32_t c) {
    if (unicode::isWordChar(c)) return Kind::Word;
    return unicode::isWhitespace(c) ? Kind::Space : Kind::Other;
  };
  std::size_t run_start = 0;
  Kind run_kind = Kind::Space;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t at = pos;
    const Kind kind = kindOf(unicode::nextCodePoint(text, pos));
    if (at > 0 && kind != run_kind) {
      out.push_back({run_start, at, run_kind != Kind::Space});
      run_start = at;
    }
    run_kind = kind;
  }
  out.push_back({run_start, text.size(), run_kind != Kind::Space});
}

std::optional<SplitBehavior> splitBehaviorOf(std::string_view name) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  return std::nullopt;
}

void splitSpans(std::vector<Span>& spans, SplitBehavior behavior, bool invert, std::vector<ByteRange>& out) {
  if (invert)
    for (Span& s : spans) s.match = !s.match;
  const std::size_t first = out.size();
  // The folds of NormalizedString::split, step for step: a match merges into the piece before
  // (or, walking backwards, after) it only when that piece is not a match itself, and
  // Contiguous joins runs of equal kind.
  bool previous_match = false;
  auto fold = [&](const Span& s, bool merge, bool into_end) {
    if (merge && out.size() > first) {
      if (into_end)
        out.back().end = s.end;
      else
        out.back().start = s.start;
    } else {
      out.push_back({s.start, s.end});
    }
    previous_match = s.match;
  };
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Span& s : spans) out.push_back({s.start, s.end});
      break;
    case SplitBehavior::Removed:
      for (const Span& s : spans)
        if (!s.match) out.push_back({s.start, s.end});
      break;
    case SplitBehavior::Contiguous:
      for (const Span& s : spans) fold(s, s.match == previous_match, true);
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& s : spans) fold(s, s.match && !previous_match, true);
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) fold(*it, it->match && !previous_match, false);
      std::reverse(out.begin() + static_cast<long>(first), out.end());
      break;
  }
  out.erase(std::remove_if(out.begin() + static_cast<long>(first), out.end(),
                           [](const ByteRange& r) { return r.start == r.end; }),
            out.end());
}

void replaceMatches(const Pattern& pattern, std::string_view text, std::string_view content, std::string& out) {
  thread_local std::vector<Span> spans;
  spans.clear();
  pattern.spans(text, spans);
  for (const Span& s : spans) {
    if (s.match)
      out.append(content);
    else
      out.append(text.substr(s.start, s.end - s.start));
  }
}

}  // namespace astraflow::text
