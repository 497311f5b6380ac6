#pragma once
// Reading a tokenizer.json's normaliser, pre-tokenizer and decoder into the steps that
// hf_tokenizer.cpp runs; anything else is refused, naming the component and its type.
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "text/decoders.hpp"
#include "text/json_reader.hpp"
#include "text/normalizers.hpp"
#include "text/pre_tokenizers.hpp"

namespace astraflow::text {

// The ByteLevel pre-tokenizer, which the encoder applies after the other pre-tokenizers: nothing
// may follow it, as nothing could split its byte symbols the way tokenizers would.
struct ByteLevelStep {
  bool enabled = false;
  bool add_prefix_space = false;  // a space before each piece that lacks one
  bool use_regex = false;         // GPT-2's split, after the prefix space
};

struct PreTokenizerChain {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  ByteLevelStep byte_level;
};

// Each appends to `out`; a null `j` (no such component) appends nothing.
void readNormalizer(const JsonReader& r, const nlohmann::json& j, Normalizers& out);
void readPreTokenizer(const JsonReader& r, const nlohmann::json& j, PreTokenizerChain& out);
void readDecoder(const JsonReader& r, const nlohmann::json& j, Decoders& out);

}  // namespace astraflow::text
