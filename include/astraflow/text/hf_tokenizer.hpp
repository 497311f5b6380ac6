#pragma once
// A Hugging Face tokenizer.json, encoded and decoded as the `tokenizers` library does: BPE
// (byte-level, as Qwen2/Qwen3, Llama-3, GPT-2, GPT-4o and DeepSeek-V3 files have it, or
// SentencePiece-style with byte fallback, as Llama-2 and Mistral files) with its normalisers,
// pre-tokenizers (Split with any regex, run by Oniguruma as tokenizers runs it, ByteLevel,
// Metaspace, Digits, Punctuation, the whitespace splits), added and special tokens,
// TemplateProcessing/ByteLevel post-processors and decoders. A file that uses a model,
// normaliser, pre-tokenizer, post-processor or decoder this does not implement is refused by
// name when it is loaded (docs/models.md lists what is supported).
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

class HfTokenizer final : public Tokenizer {
 public:
  // `path`: a tokenizer.json or the folder holding one; the tokenizer_config.json beside it, if
  // any, names bos/eos/pad/unk. Throws Error naming the file and the unsupported or malformed
  // part.
  static std::unique_ptr<HfTokenizer> load(const std::filesystem::path& path);
  ~HfTokenizer() override;

  // tokenizers' Tokenizer.encode(text, add_special_tokens): the post-processor's special tokens
  // (Llama-3's <|begin_of_text|>) come only with add_special_tokens. Throws Error on text that
  // is not valid UTF-8.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // As a piece of a longer sequence (a rendered chat, an environment's reply): no
  // post-processor tokens, as transformers encodes apply_chat_template's text.
  std::vector<std::int32_t> encode(std::string_view text) const override { return encode(text, false); }

  // tokenizers' decode(ids, skip_special_tokens); throws Error on an id that is neither a
  // vocabulary entry nor an added token.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const;
  std::string decode(std::span<const std::int32_t> ids) const override { return decode(ids, true); }

  std::int32_t vocabSize() const override;
  std::int32_t padId() const override;  // -1 where tokenizer_config.json names none
  std::int32_t bosId() const override;
  std::int32_t eosId() const override;
  std::int32_t unkId() const override;
  // Added tokens by content, then vocabulary entries by their (byte-level) spelling.
  std::optional<std::int32_t> tokenId(std::string_view token) const override;
  // The added token's content or the vocabulary entry's spelling (byte-level symbols).
  std::string tokenText(std::int32_t id) const override;
  // Whether `id` is an added token marked special (skipped by decode with skip_special_tokens).
  bool isSpecial(std::int32_t id) const;

  struct Impl;

 private:
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow
