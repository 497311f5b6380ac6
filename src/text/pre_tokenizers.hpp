#pragma once
// The pre-tokenizers of a tokenizer.json but ByteLevel (which the encoder applies last, as it
// turns pieces into byte symbols): each cuts one piece of normalised text into smaller ones, in
// order, as tokenizers' PreTokenizedString::split does, dropping empty pieces.
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/split_pattern.hpp"
#include "text/split_rules.hpp"

namespace astraflow::text {

struct Piece {
  std::string_view text;
  // The piece begins the input text (tokenizers: its original offset is 0), which Metaspace's
  // prepend_scheme "first" asks.
  bool at_start = false;
};

// The buffers of one encode call. Pieces are views into the text or into `written`: a deque
// never moves its strings, so the views stay valid while later steps write more.
struct PreTokenizeScratch {
  std::vector<Span> spans;
  std::vector<ByteRange> ranges;
  std::vector<std::string_view> views;
  SplitScratch rule;
  std::deque<std::string> written;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the non-empty pieces `piece` is cut into to `out`.
  virtual void split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const = 0;
};

// A Split whose regex is one of the hand-written rules (split_rules.hpp), behaviour Isolated,
// not inverted: the same pieces as Oniguruma's, about four times as fast.
class RuleSplit final : public PreTokenizer {
 public:
  explicit RuleSplit(SplitRule rule) : rule_(rule) {}
  void split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const override;

 private:
  SplitRule rule_;
};

// A pattern and what becomes of its matches: Split (any regex or string, any behaviour,
// invert), Punctuation, Digits, WhitespaceSplit and Whitespace.
class PatternSplit final : public PreTokenizer {
 public:
  PatternSplit(std::unique_ptr<Pattern> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const override;

 private:
  std::unique_ptr<Pattern> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { Always, First, Never };

// Metaspace: spaces become the replacement character (SentencePiece's ▁), which is put before
// the piece as the prepend scheme says, and the piece is cut before each replacement character
// (MergedWithNext) when `split`.
class MetaspaceSplit final : public PreTokenizer {
 public:
  MetaspaceSplit(char32_t replacement, PrependScheme prepend, bool split);
  void split(Piece piece, PreTokenizeScratch& scratch, std::vector<Piece>& out) const override;

 private:
  std::string replacement_;  // UTF-8
  PrependScheme prepend_;
  bool split_;
  CharPattern is_replacement_;
};

}  // namespace astraflow::text
