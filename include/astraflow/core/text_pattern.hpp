#pragma once
// Patterns over text a model, a user or the network wrote: RE2 underneath (docs/tasks.md,
// "Patterns"), so a match takes time linear in the text and no recursion, whatever the text —
// a 200,000-character answer or 5,000 nested braces cannot exhaust the stack as libstdc++'s
// backtracking regex engine did (it recursed once per character). Compiled once at
// construction; matching is const and safe from any thread.
//
// The dialect is RE2's (Perl-like: classes, \d \s \w \b, (?:…), (?i), lazy quantifiers, named
// groups); backreferences and lookaround are refused at construction with RE2's reason.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace astraflow {

// One match: the whole matched span and each capturing group (nullopt where the group took no
// part), all views into the searched text.
struct PatternMatch {
  std::string_view whole;
  std::vector<std::optional<std::string_view>> groups;
};

class TextPattern {
 public:
  // Throws astraflow::Error naming `what` (the config key or the caller), the pattern and RE2's
  // reason when it does not compile.
  explicit TextPattern(std::string_view pattern, std::string_view what = "pattern");
  ~TextPattern();
  TextPattern(TextPattern&&) noexcept;
  TextPattern& operator=(TextPattern&&) noexcept;

  const std::string& pattern() const { return pattern_; }
  int groupCount() const;

  // The leftmost match anywhere in `text`.
  std::optional<PatternMatch> search(std::string_view text) const;
  // The last of the non-overlapping matches, scanning left to right (an empty match advances
  // one byte), as a find-all would list them.
  std::optional<PatternMatch> lastMatch(std::string_view text) const;
  // Whether the pattern matches all of `text`; the match with its groups when it does.
  std::optional<PatternMatch> fullMatch(std::string_view text) const;

 private:
  std::optional<PatternMatch> matchAt(std::string_view text, std::size_t from, bool anchor_both) const;

  std::string pattern_;
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace astraflow
