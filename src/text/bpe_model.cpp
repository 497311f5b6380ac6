// BpeModel: a tokenizer.json's BPE vocabulary and ranked merges, and `tokenizers`' merge loop over one word (lowest
// rank first, then leftmost), with byte fallback, unk handling and a word cache.
#include "text/bpe_model.hpp"

#include <fmt/format.h>

#include <queue>

#include "astraflow/core/error.hpp"
#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

constexpr std::size_t kCacheWords = 10000;
constexpr std::size_t kCacheWordBytes = 256;

std::uint64_t pairKey(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

BpeModel::BpeModel(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  std::int32_t bound = 0;
  for (const auto& [token, id] : vocab_) {
    if (id < 0) throw Error(fmt::format("vocabulary entry {:?} has a negative id {}", token, id));
    bound = std::max(bound, id + 1);
  }
  byte_ids_.fill(-1);
  if (options_.byte_fallback) {
    for (int b = 0; b < 256; ++b)
      byte_ids_[static_cast<std::size_t>(b)] = idOf(fmt::format("<0x{:02X}>", b)).value_or(-1);
  }
  tokens_.resize(static_cast<std::size_t>(bound));
  for (const auto& [token, id] : vocab_) tokens_[static_cast<std::size_t>(id)] = token;
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto left = idOf(a);
    const auto right = idOf(b);
    const auto result = idOf(a + b);
    if (!left || !right || !result)
      throw Error(fmt::format("merge {} ({:?} {:?}) names a token that is not in the vocabulary", rank, a, b));
    // The first occurrence of a pair keeps its rank, as in tokenizers.
    merges_.try_emplace(pairKey(*left, *right), Merge{static_cast<std::int32_t>(rank), *result});
  }
}

std::optional<std::int32_t> BpeModel::idOf(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::tokenOf(std::int32_t id) const {
  if (id < 0 || id >= idBound()) return nullptr;
  const std::string& t = tokens_[static_cast<std::size_t>(id)];
  return t.empty() ? nullptr : &t;
}

const BpeModel::Merge* BpeModel::mergeOf(std::int32_t left, std::int32_t right) const {
  const auto it = merges_.find(pairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encodeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = idOf(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  mergeWord(word, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheWords)
      cache_.try_emplace(std::string(word), out.begin() + static_cast<long>(first), out.end());
  }
}

void BpeModel::mergeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  // Symbols as a doubly linked list over one vector; a merged-away symbol has id -1.
  struct Symbol {
    std::int32_t id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](std::int32_t id) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, -1});
    if (index > 0) symbols[static_cast<std::size_t>(index - 1)].next = index;
  };
  // tokenizers' merge_word: an unknown character is held back as a pending unk (one for a run
  // when fuse_unk), which the next known character or the end of the word adds; byte-fallback
  // tokens do not add it, so they come before it.
  bool pending_unk = false;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t start = pos;
    unicode::nextCodePoint(word, pos);
    const std::string_view symbol = word.substr(start, pos - start);
    if (const auto id = idOf(symbol)) {
      if (pending_unk) add(*options_.unk_id);
      pending_unk = false;
      add(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char ch : symbol) all = all && byte_ids_[static_cast<unsigned char>(ch)] >= 0;
      if (all) {
        for (char ch : symbol) add(byte_ids_[static_cast<unsigned char>(ch)]);
        continue;
      }
    }
    if (!options_.unk_id) continue;
    if (pending_unk && !options_.fuse_unk) add(*options_.unk_id);
    pending_unk = true;
  }
  if (pending_unk) add(*options_.unk_id);

  struct Candidate {
    std::int32_t rank;
    int pos;
    std::int32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto offer = [&](int pos) {
    const int next = symbols[static_cast<std::size_t>(pos)].next;
    if (next < 0) return;
    if (const Merge* m = mergeOf(symbols[static_cast<std::size_t>(pos)].id, symbols[static_cast<std::size_t>(next)].id))
      queue.push({m->rank, pos, m->result});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) offer(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const Merge* m = mergeOf(left.id, right.id);
    if (m == nullptr || m->result != top.result) continue;  // the pair changed since it was queued
    left.id = top.result;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(top.pos);
  }
  for (const Symbol& s : symbols)
    if (s.id >= 0) out.push_back(s.id);
}

}  // namespace astraflow::text
