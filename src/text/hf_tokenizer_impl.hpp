#pragma once
// The parts of a loaded tokenizer.json (include/astraflow/text/hf_tokenizer.hpp), shared by the
// loader (hf_tokenizer_load.cpp) and the encoder/decoder (hf_tokenizer.cpp).
#include <filesystem>
#include <memory>
#include <unordered_map>
#include <vector>

#include "astraflow/text/hf_tokenizer.hpp"
#include "text/added_tokens.hpp"
#include "text/bpe_model.hpp"
#include "text/decoders.hpp"
#include "text/normalizers.hpp"
#include "text/pipeline_load.hpp"

namespace astraflow {

struct HfTokenizer::Impl {
  std::filesystem::path file;

  text::Normalizers normalizers;  // applied in order; empty: none

  // Pre-tokenizers in order, then optionally the byte-level map (always last).
  text::PreTokenizerChain pre_tokenizer;

  std::unique_ptr<text::BpeModel> model;

  std::vector<text::AddedToken> added;  // never resized after the matchers point into it
  std::unordered_map<std::int32_t, std::size_t> added_by_id;
  text::TokenIds added_by_content;
  text::AddedTokenMatcher raw_matcher;         // normalized: false tokens, on the raw text
  text::AddedTokenMatcher normalized_matcher;  // normalized: true tokens, on normalised text

  // The post-processor's single-sequence template: ids before and after the text.
  std::vector<std::int32_t> prefix_ids;
  std::vector<std::int32_t> suffix_ids;

  // Decoders in order; with no decoder at all, tokens are joined with spaces (as tokenizers does).
  bool has_decoder = false;
  text::Decoders decoders;

  std::int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  std::int32_t vocab_size = 0;

  const text::AddedToken* addedToken(std::int32_t id) const {
    const auto it = added_by_id.find(id);
    return it == added_by_id.end() ? nullptr : &added[it->second];
  }
};

// Reads `path` (a tokenizer.json or its folder) into an Impl; throws Error naming the file and
// the part it cannot use.
std::unique_ptr<HfTokenizer::Impl> loadHfTokenizerImpl(const std::filesystem::path& path);

}  // namespace astraflow
