#pragma once
// The BPE model of a tokenizer.json: vocabulary, ranked merges, and the merge loop of
// `tokenizers` (lowest rank first, leftmost first among equal ranks), with a word cache.
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace astraflow::text {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  bool ignore_merges = false;  // a word that is a whole vocabulary entry is that token (Llama-3)
  // A character outside the vocabulary: its UTF-8 bytes as <0xNN> tokens when all 256 needed are
  // there (SentencePiece-style files), else unk, else dropped (as tokenizers does).
  bool byte_fallback = false;
  std::optional<std::int32_t> unk_id;
  bool fuse_unk = false;  // a run of unknown characters is one unk
};

class BpeModel {
 public:
  // Throws Error when a merge's parts or result are not in the vocabulary (naming the merge).
  BpeModel(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of one pre-tokenized word (in the byte-level symbols).
  void encodeWord(std::string_view word, std::vector<std::int32_t>& out) const;

  std::optional<std::int32_t> idOf(std::string_view token) const;
  // The vocabulary entry of `id`, or nullptr.
  const std::string* tokenOf(std::int32_t id) const;
  std::int32_t idBound() const { return static_cast<std::int32_t>(tokens_.size()); }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };
  void mergeWord(std::string_view word, std::vector<std::int32_t>& out) const;
  const Merge* mergeOf(std::int32_t left, std::int32_t right) const;

  TokenIds vocab_;
  std::array<std::int32_t, 256> byte_ids_;  // <0xNN> tokens for byte_fallback; -1 where none
  std::vector<std::string> tokens_;         // by id; empty where no entry
  std::unordered_map<std::uint64_t, Merge> merges_;
  BpeOptions options_;

  // Words seen before (as tokenizers does: up to 10,000 words under 256 bytes, never evicted).
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace astraflow::text
