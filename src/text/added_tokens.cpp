// AddedTokenMatcher: a tokenizer.json's added tokens found in text leftmost-longest, with the single_word, lstrip and
// rstrip rules of `tokenizers`, splitting the text into segments before normalising and pre-tokenising.
#include "text/added_tokens.hpp"

#include <algorithm>

#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

// The code point that ends `text` (valid UTF-8), or 0 when it is empty.
char32_t lastCodePoint(std::string_view text) {
  if (text.empty()) return 0;
  std::size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return unicode::nextCodePoint(text, start);
}

char32_t firstCodePoint(std::string_view text) {
  std::size_t pos = 0;
  return text.empty() ? 0 : unicode::nextCodePoint(text, pos);
}

bool endsWithWord(std::string_view text) { return !text.empty() && unicode::isWordChar(lastCodePoint(text)); }
bool startsWithWord(std::string_view text) { return !text.empty() && unicode::isWordChar(firstCodePoint(text)); }

// Where the run of whitespace that ends `text` starts.
std::size_t trailingSpaceStart(std::string_view text) {
  std::size_t start = text.size();
  while (start > 0) {
    std::size_t k = start - 1;
    while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
    std::size_t pos = k;
    if (unicode::classOf(unicode::nextCodePoint(text, pos)) != unicode::CharClass::Space) break;
    start = k;
  }
  return start;
}

// The byte length of the run of whitespace that starts `text`.
std::size_t leadingSpaceLength(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t next = pos;
    if (unicode::classOf(unicode::nextCodePoint(text, next)) != unicode::CharClass::Space) break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<std::string> spellings, std::vector<const AddedToken*> tokens)
    : spellings_(std::move(spellings)), tokens_(std::move(tokens)), by_first_byte_(256) {
  for (std::size_t i = 0; i < spellings_.size(); ++i) {
    if (spellings_[i].empty()) continue;
    by_first_byte_[static_cast<unsigned char>(spellings_[i][0])].push_back(static_cast<int>(i));
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return spellings_[static_cast<std::size_t>(a)].size() > spellings_[static_cast<std::size_t>(b)].size();
    });
  }
}

int AddedTokenMatcher::longestAt(std::string_view text, std::size_t pos) const {
  for (int i : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const std::string& s = spellings_[static_cast<std::size_t>(i)];
    if (text.size() - pos >= s.size() && text.compare(pos, s.size(), s) == 0) return i;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::size_t plain_start = 0;  // start of the text not yet emitted
  auto emitPlain = [&](std::size_t end) {
    if (end > plain_start) out.push_back({text.substr(plain_start, end - plain_start), nullptr});
  };
  for (std::size_t pos = 0; pos < text.size();) {
    const int match = empty() ? -1 : longestAt(text, pos);
    if (match < 0) {
      ++pos;
      continue;
    }
    const AddedToken* token = tokens_[static_cast<std::size_t>(match)];
    std::size_t start = pos;
    std::size_t stop = pos + spellings_[static_cast<std::size_t>(match)].size();
    pos = stop;  // matches never overlap: the scan goes on after this one, used or not
    if (token->single_word && (endsWithWord(text.substr(0, start)) || startsWithWord(text.substr(stop)))) continue;
    if (token->lstrip) start = std::max(trailingSpaceStart(text.substr(0, start)), plain_start);
    if (token->rstrip) stop += leadingSpaceLength(text.substr(stop));
    emitPlain(start);
    out.push_back({text.substr(start, stop - start), token});
    plain_start = stop;
    pos = stop;
  }
  emitPlain(text.size());
}

}  // namespace astraflow::text
