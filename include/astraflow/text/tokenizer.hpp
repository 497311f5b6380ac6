#pragma once
// Tokenizer interface (encode/decode, special-token ids, token lookup). The built-in task
// vocabulary implements it, and so does a Hugging Face tokenizer.json (text/hf_tokenizer.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/core/model_config.hpp"

namespace astraflow {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // `text` as a piece of a sequence: text spelling a special token becomes it, but nothing is
  // added around it (no post-processor <bos>); episodes put in their own.
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
  virtual std::int32_t vocabSize() const = 0;
  virtual std::int32_t padId() const = 0;
  virtual std::int32_t bosId() const = 0;
  virtual std::int32_t eosId() const = 0;
  virtual std::int32_t unkId() const = 0;
  // The id of a whole token (e.g. "</answer>"), if the vocabulary has it.
  virtual std::optional<std::int32_t> tokenId(std::string_view token) const = 0;
  virtual std::string tokenText(std::int32_t id) const = 0;
};

// The vocabulary of the built-in environments: special tokens (<pad> <bos> <eos> <unk>),
// tags (<search> </search> <information> </information> <answer> </answer> and the
// multi-agent role/verdict tags), then single characters (digits, operators, lower-case
// letters, space, punctuation). Encoding is greedy longest match; a character outside the
// vocabulary becomes <unk> (never an error): upper case, '>', a '<' that starts no whole
// token, one multi-byte UTF-8 character. Text spelling a special token ("<eos>") encodes to
// it. decode() drops <pad> <bos> <eos> <unk> (so text with <unk> does not round-trip) and
// throws std::out_of_range on an id outside the vocabulary; tokenText() gives every token's
// spelling, specials included. Ids are stable: adding tokens appends.
std::unique_ptr<Tokenizer> makeTaskTokenizer();

// The ids and size a model built for this tokenizer needs (buildPolicyModel); bos_id is -1 where
// the tokenizer has none (Qwen). Error when it has no padding token: batches are left-padded
// with it and positions skip it, so it must be a token the text never holds.
TokenSpec tokenSpecOf(const Tokenizer& t);

}  // namespace astraflow
