// OnigPattern: a tokenizer.json pattern compiled by Oniguruma, the engine `tokenizers` itself runs, and findAll, the
// left-to-right scan of matches that rust-onig's find_iter gives; safe to search from several threads.
#include "text/onig_regex.hpp"

#include <fmt/format.h>
// Oniguruma would otherwise #define UChar, which ICU (unicode.cpp, in the same unity batch) types.
#define ONIG_ESCAPE_UCHAR_COLLISION
#define ONIG_ESCAPE_REGEX_T_COLLISION
#include <oniguruma.h>

#include <string>

#include "astraflow/core/error.hpp"

namespace astraflow::text {
namespace {

std::string onigMessage(int code, OnigErrorInfo* info) {
  OnigUChar buffer[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n = info ? onig_error_code_to_str(buffer, code, info) : onig_error_code_to_str(buffer, code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n > 0 ? n : 0));
}

// onig_initialize is not thread-safe and must run once before the first onig_new: a function
// static does it exactly once, whichever thread loads the first tokenizer.
void initializeOnce() {
  static const int status = [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    return onig_initialize(encodings, 1);
  }();
  if (status != ONIG_NORMAL)
    throw Error(fmt::format("Oniguruma failed to initialise: {}", onigMessage(status, nullptr)));
}

// The match region of one thread's searches (begin/end offsets of the match), reused by every
// search that thread makes: one allocation per thread, not per search.
class MatchRegion {
 public:
  MatchRegion() : region_(onig_region_new()) {
    if (region_ == nullptr) throw std::bad_alloc();
  }
  ~MatchRegion() { onig_region_free(region_, 1); }
  MatchRegion(const MatchRegion&) = delete;
  MatchRegion& operator=(const MatchRegion&) = delete;
  OnigRegion* get() { return region_; }

 private:
  OnigRegion* region_;
};

// The byte length of the UTF-8 sequence that starts with `lead` (the text is valid UTF-8).
std::size_t sequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

OnigPattern::OnigPattern(std::string_view pattern, Syntax syntax) {
  initializeOnce();
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int status = onig_new(&regex_, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                              syntax == Syntax::Regex ? ONIG_SYNTAX_DEFAULT : ONIG_SYNTAX_ASIS, &info);
  if (status != ONIG_NORMAL) {
    regex_ = nullptr;
    throw Error(fmt::format("pattern {:?} does not compile: {}", pattern, onigMessage(status, &info)));
  }
}

OnigPattern::~OnigPattern() {
  if (regex_ != nullptr) onig_free(regex_);
}

void OnigPattern::findAll(std::string_view text, std::vector<ByteRange>& out) const {
  thread_local MatchRegion region;
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* str_end = str + text.size();
  std::size_t from = 0;
  bool matched_before = false;
  std::size_t last_match_end = 0;
  while (from <= text.size()) {
    onig_region_clear(region.get());
    const int at = onig_search(regex_, str, str_end, str + from, str_end, region.get(), ONIG_OPTION_NONE);
    if (at == ONIG_MISMATCH) return;
    if (at < 0) throw Error(fmt::format("Oniguruma search failed: {}", onigMessage(at, nullptr)));
    const auto start = static_cast<std::size_t>(region.get()->beg[0]);
    const auto end = static_cast<std::size_t>(region.get()->end[0]);
    if (start == end && matched_before && last_match_end == end) {
      from += from < text.size() ? sequenceLength(static_cast<unsigned char>(text[from])) : 1;
      continue;
    }
    out.push_back({start, end});
    from = end;
    matched_before = true;
    last_match_end = end;
  }
}

}  // namespace astraflow::text
