#pragma once
// Added tokens of a tokenizer.json (special tokens such as <|im_start|>, and user tokens such
// as <think>) and the split of text around them that `tokenizers` makes before normalising and
// pre-tokenising: leftmost-longest matches, with the single_word, lstrip and rstrip rules.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace astraflow::text {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

struct Segment {
  std::string_view text;
  const AddedToken* token = nullptr;  // null: plain text between added tokens
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `spellings[i]` is what token i matches (its content, normalised for normalized tokens).
  AddedTokenMatcher(std::vector<std::string> spellings, std::vector<const AddedToken*> tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text` in order; plain segments are never empty.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // The longest pattern that matches at `pos`, or -1.
  int longestAt(std::string_view text, std::size_t pos) const;

  std::vector<std::string> spellings_;
  std::vector<const AddedToken*> tokens_;
  std::vector<std::vector<int>> by_first_byte_;  // 256 lists of pattern indices, longest first
};

}  // namespace astraflow::text
