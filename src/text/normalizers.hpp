#pragma once
// The normalisers of a tokenizer.json, each rewriting a piece of raw text (between the
// non-normalised added tokens) as tokenizers' does; a Sequence is the list applied in order.
#include <memory>
#include <string>
#include <vector>

#include "text/split_pattern.hpp"
#include "text/unicode.hpp"

namespace astraflow::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text) const = 0;
};

// NFC, NFD, NFKC, NFKD (ICU's).
class NormalFormNormalizer final : public Normalizer {
 public:
  explicit NormalFormNormalizer(unicode::NormalForm form) : form_(form) {}
  void apply(std::string& text) const override { unicode::normalize(form_, text); }

 private:
  unicode::NormalForm form_;
};

// Lowercase: each code point's full lowercase mapping.
class LowercaseNormalizer final : public Normalizer {
 public:
  void apply(std::string& text) const override;
};

// Strip: White_Space off the left and/or right end.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override;

 private:
  bool left_, right_;
};

// Replace: every match of a regex or string by `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::string& text) const override;

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

// Prepend: `prefix` before any text that is not empty (SentencePiece's ▁ in Llama-2 files).
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

using Normalizers = std::vector<std::unique_ptr<Normalizer>>;

inline void normalizeAll(const Normalizers& normalizers, std::string& text) {
  for (const auto& n : normalizers) n->apply(text);
}

}  // namespace astraflow::text
