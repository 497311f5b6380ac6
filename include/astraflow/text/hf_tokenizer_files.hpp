#pragma once
// Tokenizer files of a Hugging Face model folder (tokenizer.json, tokenizer_config.json) that
// init-model writes: the byte-level tokenizer with no merges that tests and small demos use, or
// a copy of a user's tokenizer.json.
#include <filesystem>
#include <string>

namespace astraflow {

struct HfTokenizerSummary {
  int vocab_size = 0;  // highest id in the model's vocabulary or added tokens, plus one
  int bos_token_id = -1;
  int eos_token_id = -1;
  int pad_token_id = -1;
};

// Writes the byte-level tokenizer into `folder`: the 256 byte symbols of GPT-2's byte-to-unicode
// map (id = byte value), no merges, Qwen's normalizer and pre-tokenizer, and the ChatML special
// tokens <|endoftext|> (256, padding), <|im_start|> (257), <|im_end|> (258, end of turn); with a
// tokenizer_config.json holding a ChatML chat template, as Qwen's folders have.
HfTokenizerSummary writeByteLevelTokenizer(const std::filesystem::path& folder);

class Tokenizer;

// Writes `tokenizer` (the built-in task vocabulary: whole-token tags and single characters,
// greedy longest match, unknown characters → <unk>) as the tokenizer.json of a WordLevel model
// over single characters with the tags as added tokens, which `tokenizers` encodes the same
// way, plus a tokenizer_config.json naming <pad> <bos> <eos> <unk>.
HfTokenizerSummary writeTaskTokenizer(const Tokenizer& tokenizer, const std::filesystem::path& folder);

// Copies `tokenizer_json` (and the tokenizer_config.json beside it, if there is one) into
// `folder`; the vocabulary size and special ids are read from them. Throws Error naming the file
// when it is not a tokenizer.json (no model.vocab object).
HfTokenizerSummary copyTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& folder);

}  // namespace astraflow
