#pragma once
// The decoders of a tokenizer.json: each rewrites the list of token strings as tokenizers'
// decode_chain does, and decode joins what the last one leaves (a Sequence chains them).
#include <memory>
#include <string>
#include <vector>

#include "text/pre_tokenizers.hpp"
#include "text/split_pattern.hpp"

namespace astraflow::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

// ByteLevel: tokens spelt in byte symbols back to their bytes (a token with any other character,
// such as an added "<think>", as its own UTF-8), all as one string read as UTF-8 with U+FFFD for
// what is ill-formed.
class ByteLevelDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override;
};

// ByteFallback: runs of <0xNN> tokens become the text of their bytes, or one U+FFFD per byte
// when the run is not valid UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override;
};

// Fuse: all tokens as one.
class FuseDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override;
};

// Strip: up to `start` leading and `stop` trailing `content` characters off each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override;

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

// Replace: every match of a regex or string in each token by `content`.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens) const override;

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

// Metaspace: the replacement character back to a space, but in the first token, where it is
// dropped unless the prepend scheme is "never" (it stood for the prepended space).
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, PrependScheme prepend) : replacement_(replacement), prepend_(prepend) {}
  void apply(std::vector<std::string>& tokens) const override;

 private:
  char32_t replacement_;
  PrependScheme prepend_;
};

using Decoders = std::vector<std::unique_ptr<Decoder>>;

}  // namespace astraflow::text
