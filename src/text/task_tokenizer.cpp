// The built-in task vocabulary (include/astraflow/text/tokenizer.hpp): whole-token tags
// plus single characters, encoded by greedy longest match.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "astraflow/core/error.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {
namespace {

// Ids are positions in this list; never reorder or remove, only append.
constexpr std::array<std::string_view, 17> kWholeTokens = {
    "<pad>",         "<bos>",          "<eos>",    "<unk>",       "<search>",    "</search>",
    "<information>", "</information>", "<answer>", "</answer>",   "<solver>",    "<verifier>",
    "<selector>",    "<approve>",      "<reject>", "<candidate>", "</candidate>"};
constexpr std::string_view kCharacters = "0123456789+-*/=()?:,._ abcdefghijklmnopqrstuvwxyz";

constexpr std::int32_t kPad = 0;
constexpr std::int32_t kBos = 1;
constexpr std::int32_t kEos = 2;
constexpr std::int32_t kUnk = 3;

class TaskTokenizer final : public Tokenizer {
 public:
  TaskTokenizer() {
    for (std::string_view t : kWholeTokens) texts_.emplace_back(t);
    for (char c : kCharacters) texts_.emplace_back(1, c);
    char_ids_.fill(kUnk);
    for (std::size_t id = 0; id < texts_.size(); ++id) {
      const auto i = static_cast<std::int32_t>(id);
      ids_.emplace(texts_[id], i);
      if (texts_[id].size() == 1)
        char_ids_[static_cast<unsigned char>(texts_[id][0])] = i;
      else
        by_length_.push_back(i);
    }
    // Longest first, so that greedy matching prefers the longer of two tokens sharing a prefix.
    std::stable_sort(by_length_.begin(), by_length_.end(),
                     [this](std::int32_t a, std::int32_t b) { return texts_[a].size() > texts_[b].size(); });
  }

  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
      if (text[pos] == '<') {
        if (auto id = matchWholeToken(text.substr(pos))) {
          out.push_back(*id);
          pos += texts_[*id].size();
          continue;
        }
      }
      const auto byte = static_cast<unsigned char>(text[pos]);
      out.push_back(char_ids_[byte]);
      ++pos;
      // A multi-byte UTF-8 character is one character outside the vocabulary: one <unk>.
      if (byte >= 0xC0) {
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
    return out;
  }

  std::string decode(std::span<const std::int32_t> ids) const override {
    std::string out;
    for (std::int32_t id : ids) {
      checkId(id);
      if (id == kPad || id == kBos || id == kEos || id == kUnk) continue;
      out += texts_[static_cast<std::size_t>(id)];
    }
    return out;
  }

  std::int32_t vocabSize() const override { return static_cast<std::int32_t>(texts_.size()); }
  std::int32_t padId() const override { return kPad; }
  std::int32_t bosId() const override { return kBos; }
  std::int32_t eosId() const override { return kEos; }
  std::int32_t unkId() const override { return kUnk; }

  std::optional<std::int32_t> tokenId(std::string_view token) const override {
    auto it = ids_.find(std::string(token));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

  std::string tokenText(std::int32_t id) const override {
    checkId(id);
    return texts_[static_cast<std::size_t>(id)];
  }

 private:
  std::optional<std::int32_t> matchWholeToken(std::string_view rest) const {
    for (std::int32_t id : by_length_) {
      if (rest.starts_with(texts_[static_cast<std::size_t>(id)])) return id;
    }
    return std::nullopt;
  }

  void checkId(std::int32_t id) const {
    if (id < 0 || id >= vocabSize()) {
      throw std::out_of_range("task tokenizer: token id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(vocabSize()) + ")");
    }
  }

  std::vector<std::string> texts_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::array<std::int32_t, 256> char_ids_{};
  std::vector<std::int32_t> by_length_;  // ids of multi-character tokens, longest first
};

}  // namespace

std::unique_ptr<Tokenizer> makeTaskTokenizer() { return std::make_unique<TaskTokenizer>(); }

TokenSpec tokenSpecOf(const Tokenizer& t) {
  const std::int32_t pad = t.padId();
  if (pad < 0)
    throw Error(
        "the tokenizer has no padding token: name one in tokenizer_config.json (\"pad_token\"), a token the text "
        "never holds (Llama-3: <|finetune_right_pad_id|>)");
  if (pad == t.eosId())
    throw Error(
        fmt::format("the tokenizer's padding token {} is its end-of-sequence token: name another "
                    "\"pad_token\" in tokenizer_config.json (padding is masked out, the end of a turn is not)",
                    t.tokenText(pad)));
  return {t.vocabSize(), pad, t.bosId()};
}

}  // namespace astraflow
