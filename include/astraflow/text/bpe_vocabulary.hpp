#pragma once
// A byte-level BPE tokenizer.json as a flat vocabulary, the form GGUF files carry
// (tokenizer.ggml.*): every id's spelling and kind, the merges, and the name llama.cpp gives
// the pre-tokenizer's split rule.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace astraflow {

// llama.cpp's token types.
enum class TokenKind : std::int32_t { Normal = 1, Control = 3, UserDefined = 4, Unused = 5 };

struct BpeVocabulary {
  std::vector<std::string> tokens;  // by id: vocabulary entries, added tokens, "[PAD<id>]" gaps
  std::vector<TokenKind> kinds;     // Control: special added tokens; UserDefined: other added ones
  std::vector<std::string> merges;  // "a b", by rank
  std::string pre;                  // "qwen2", "llama-bpe" or "gpt-2"
  bool add_bos = false;             // the post-processor puts a token before the text
  std::string chat_template;        // chat_template.jinja or tokenizer_config.json's; may be empty
};

// Reads the folder's tokenizer.json (and tokenizer_config.json / chat_template.jinja), padded to
// `vocab_size` ids (the model's embedding rows). Throws Error naming the file when it is not a
// byte-level BPE file HfTokenizer accepts, its split is not one llama.cpp names (Qwen2's,
// Llama-3's, GPT-2's), or it has ids past vocab_size.
BpeVocabulary readBpeVocabulary(const std::filesystem::path& folder, std::int32_t vocab_size);

}  // namespace astraflow
