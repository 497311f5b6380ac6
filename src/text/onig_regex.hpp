#pragma once
// A pattern of a tokenizer.json (a Split pre-tokenizer's, a Replace normaliser's or decoder's),
// compiled once by Oniguruma: the regex engine the `tokenizers` library itself runs
// (tokenizers' SysRegex is rust-onig's Regex::new: UTF-8, Oniguruma's default syntax, no
// options), so a pattern means here what it means there, to its look-arounds, possessive
// quantifiers, Unicode classes and case folding. Searches from several threads at once are safe
// (the compiled pattern is only read; each thread keeps its own match region).
#include <cstddef>
#include <string_view>
#include <vector>

struct re_pattern_buffer;  // Oniguruma's regex_t

namespace astraflow::text {

struct ByteRange {
  std::size_t start = 0, end = 0;
};

class OnigPattern {
 public:
  enum class Syntax {
    Regex,    // Oniguruma's default syntax, as tokenizers' {"Regex": ...} patterns
    Literal,  // the pattern's bytes as they are, as tokenizers' {"String": ...} patterns (it
              // escapes them into a regex; Oniguruma's ASIS syntax takes them verbatim)
  };
  // Throws Error with Oniguruma's message when the pattern does not compile.
  OnigPattern(std::string_view pattern, Syntax syntax);
  ~OnigPattern();
  OnigPattern(const OnigPattern&) = delete;
  OnigPattern& operator=(const OnigPattern&) = delete;

  // Appends every match of a left-to-right scan of `text` (valid UTF-8), as rust-onig's
  // find_iter gives them to tokenizers: each search starts where the previous match ended,
  // look-behinds see the text before it, and an empty match right where the previous match
  // ended is skipped by one character. Throws Error when Oniguruma gives up on a search (its
  // backtracking retry limit), where tokenizers would panic.
  void findAll(std::string_view text, std::vector<ByteRange>& out) const;

 private:
  re_pattern_buffer* regex_ = nullptr;
};

}  // namespace astraflow::text
