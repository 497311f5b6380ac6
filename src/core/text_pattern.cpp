// TextPattern over RE2 (include/astraflow/core/text_pattern.hpp).
#include "astraflow/core/text_pattern.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include "astraflow/core/error.hpp"

namespace astraflow {
namespace {

RE2::Options patternOptions() {
  RE2::Options o;
  o.set_log_errors(false);  // the reason goes into the Error, not to stderr from every rank
  o.set_max_mem(32 << 20);  // RE2's DFA budget: past it RE2 falls back to its NFA, still linear
  o.set_encoding(RE2::Options::EncodingUTF8);
  return o;
}

}  // namespace

TextPattern::TextPattern(std::string_view pattern, std::string_view what)
    : pattern_(pattern),
      re_(std::make_unique<re2::RE2>(re2::StringPiece(pattern_.data(), pattern_.size()), patternOptions())) {
  if (!re_->ok())
    throw Error(fmt::format("{}: the pattern '{}' does not compile as an RE2 pattern ({}; docs/tasks.md, \"Patterns\")",
                            what, pattern_, re_->error()));
}

TextPattern::~TextPattern() = default;
TextPattern::TextPattern(TextPattern&&) noexcept = default;
TextPattern& TextPattern::operator=(TextPattern&&) noexcept = default;

int TextPattern::groupCount() const { return re_->NumberOfCapturingGroups(); }

std::optional<PatternMatch> TextPattern::matchAt(std::string_view text, std::size_t from, bool anchor_both) const {
  const int n = re_->NumberOfCapturingGroups();
  // Fixed-size RE2 output: the whole match and n groups. A vector per call is what one match
  // costs; the text itself is never copied.
  std::vector<re2::StringPiece> spans(static_cast<std::size_t>(n) + 1);
  const re2::StringPiece input(text.data(), text.size());
  if (!re_->Match(input, from, text.size(), anchor_both ? RE2::ANCHOR_BOTH : RE2::UNANCHORED, spans.data(), n + 1))
    return std::nullopt;
  PatternMatch m;
  m.whole = std::string_view(spans[0].data(), spans[0].size());
  m.groups.reserve(static_cast<std::size_t>(n));
  for (int g = 1; g <= n; ++g) {
    const auto& s = spans[static_cast<std::size_t>(g)];
    if (s.data() == nullptr)
      m.groups.emplace_back(std::nullopt);
    else
      m.groups.emplace_back(std::string_view(s.data(), s.size()));
  }
  return m;
}

std::optional<PatternMatch> TextPattern::search(std::string_view text) const { return matchAt(text, 0, false); }

std::optional<PatternMatch> TextPattern::fullMatch(std::string_view text) const { return matchAt(text, 0, true); }

std::optional<PatternMatch> TextPattern::lastMatch(std::string_view text) const {
  std::optional<PatternMatch> last;
  std::size_t from = 0;
  while (from <= text.size()) {
    auto m = matchAt(text, from, false);
    if (!m) break;
    const std::size_t begin = static_cast<std::size_t>(m->whole.data() - text.data());
    const std::size_t end = begin + m->whole.size();
    from = end > begin ? end : end + 1;
    last = std::move(m);
  }
  return last;
}

}  // namespace astraflow
