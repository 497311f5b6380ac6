// split() of the pre-tokenizers other than ByteLevel (RuleSplit, PatternSplit, MetaspaceSplit): each cuts a piece of
// normalised text into smaller non-empty pieces as tokenizers' PreTokenizedString::split does.
#include "text/pre_tokenizers.hpp"

#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

// The ranges of `text` as pieces; only one that begins the text can begin the input.
void appendRanges(Piece piece, const std::vector<ByteRange>& ranges, std::vector<Piece>& out) {
  for (const ByteRange& r : ranges)
    out.push_back({piece.text.substr(r.start, r.end - r.start), piece.at_start && r.start == 0});
}

}  // namespace

void RuleSplit::split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const {
  scratch.views.clear();
  splitPieces(rule_, piece.text, scratch.views, scratch.rule);
  bool first = piece.at_start;
  for (std::string_view v : scratch.views) {
    out.push_back({v, first});
    first = false;
  }
}

void PatternSplit::split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const {
  scratch.spans.clear();
  scratch.ranges.clear();
  pattern_->spans(piece.text, scratch.spans);
  splitSpans(scratch.spans, behavior_, invert_, scratch.ranges);
  appendRanges(piece, scratch.ranges, out);
}

MetaspaceSplit::MetaspaceSplit(char32_t replacement, PrependScheme prepend, bool split)
    : prepend_(prepend), split_(split), is_replacement_([replacement](char32_t c) { return c == replacement; }) {
  unicode::appendUtf8(replacement_, replacement);
}

void MetaspaceSplit::split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const {
  if (piece.text.empty()) return;
  std::string& text = scratch.written.emplace_back();
  text.reserve(piece.text.size() + replacement_.size());
  // tokenizers prepends after replacing, so a piece that began with a space begins with the
  // replacement already and gets no second one.
  const bool starts_replaced = piece.text.front() == ' ' || piece.text.starts_with(replacement_);
  const bool prepend =
      !starts_replaced && (prepend_ == PrependScheme::Always || (prepend_ == PrependScheme::First && piece.at_start));
  if (prepend) text += replacement_;
  for (char ch : piece.text) {
    if (ch == ' ')
      text += replacement_;
    else
      text += ch;
  }
  const Piece written{text, piece.at_start};
  if (!split_) {
    out.push_back(written);
    return;
  }
  scratch.spans.clear();
  scratch.ranges.clear();
  is_replacement_.spans(written.text, scratch.spans);
  splitSpans(scratch.spans, SplitBehavior::MergedWithNext, false, scratch.ranges);
  appendRanges(written, scratch.ranges, out);
}

}  // namespace astraflow::text
