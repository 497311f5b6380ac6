// Encoding and decoding of a loaded tokenizer.json, step for step as `tokenizers` does it:
// added tokens are split off the raw text, the rest is normalised, split off the normalised
// added tokens, pre-tokenized, byte-level mapped and BPE-merged; the post-processor's template
// wraps the ids.
#include <fmt/format.h>

#include "astraflow/core/error.hpp"
#include "text/byte_level.hpp"
#include "text/hf_tokenizer_impl.hpp"

namespace astraflow {
namespace {

using Impl = HfTokenizer::Impl;

// Reused buffers of one encode call.
struct Scratch {
  std::vector<text::Segment> raw, normalized;
  std::vector<std::string_view> pieces, next_pieces;
  text::SplitScratch split;
  std::string prefixed, word;
};

void encodeWordPieces(const Impl& t, std::string_view piece, Scratch& s, std::vector<std::int32_t>& ids) {
  if (!t.byte_level) {
    t.model->encodeWord(piece, ids);
    return;
  }
  std::string_view text = piece;
  if (t.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
    s.prefixed.assign(1, ' ');
    s.prefixed.append(piece);
    text = s.prefixed;
  }
  auto emit = [&](std::string_view sub) {
    s.word.clear();
    text::appendByteSymbols(sub, s.word);
    t.model->encodeWord(s.word, ids);
  };
  if (!t.byte_level_regex) {
    emit(text);
    return;
  }
  std::vector<std::string_view> subs;
  text::splitPieces(text::SplitRule::Gpt2, text, subs, s.split);
  for (std::string_view sub : subs) emit(sub);
}

// Normalised text between added tokens: the Split steps, then byte-level BPE per piece.
void encodePlain(const Impl& t, std::string_view text, Scratch& s, std::vector<std::int32_t>& ids) {
  s.pieces.assign(1, text);
  for (text::SplitRule rule : t.splits) {
    s.next_pieces.clear();
    for (std::string_view piece : s.pieces) text::splitPieces(rule, piece, s.next_pieces, s.split);
    std::swap(s.pieces, s.next_pieces);
  }
  for (std::string_view piece : s.pieces) encodeWordPieces(t, piece, s, ids);
}

}  // namespace

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::filesystem::path& path) {
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(loadHfTokenizerImpl(path)));
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  unicode::requireUtf8(text);
  std::vector<std::int32_t> ids;
  if (add_special_tokens) ids = t.prefix_ids;
  Scratch s;
  t.raw_matcher.split(text, s.raw);
  std::string normalized;
  for (const text::Segment& raw : s.raw) {
    if (raw.token != nullptr) {
      ids.push_back(raw.token->id);
      continue;
    }
    normalized.assign(raw.text);
    for (unicode::NormalForm form : t.normalizers) unicode::normalize(form, normalized);
    s.normalized.clear();
    t.normalized_matcher.split(normalized, s.normalized);
    for (const text::Segment& seg : s.normalized) {
      if (seg.token != nullptr)
        ids.push_back(seg.token->id);
      else
        encodePlain(t, seg.text, s, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), t.suffix_ids.begin(), t.suffix_ids.end());
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<const std::string*> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (const text::AddedToken* a = t.addedToken(id)) {
      if (!(skip_special_tokens && a->special)) tokens.push_back(&a->content);
    } else if (const std::string* token = t.model->tokenOf(id)) {
      tokens.push_back(token);
    } else {
      throw Error(fmt::format("{}: id {} is neither a vocabulary entry nor an added token", t.file.string(), id));
    }
  }
  std::string out;
  if (!t.byte_level_decoder) {
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + *tokens[i];
    return out;
  }
  // A token whose characters are all byte symbols stands for those bytes; any other (an added
  // token such as "<think>" or one with a space) for its own UTF-8 bytes; the bytes are then
  // read as UTF-8 with U+FFFD for what is ill-formed.
  std::string bytes, token_bytes;
  for (const std::string* token : tokens) {
    token_bytes.clear();
    bool all_symbols = true;
    for (std::size_t pos = 0; pos < token->size() && all_symbols;) {
      const auto b = text::symbolByte(unicode::nextCodePoint(*token, pos));
      if (b)
        token_bytes += static_cast<char>(*b);
      else
        all_symbols = false;
    }
    bytes += all_symbols ? token_bytes : *token;
  }
  return unicode::utf8Lossy(bytes);
}

std::int32_t HfTokenizer::vocabSize() const { return impl_->vocab_size; }
std::int32_t HfTokenizer::padId() const { return impl_->pad; }
std::int32_t HfTokenizer::bosId() const { return impl_->bos; }
std::int32_t HfTokenizer::eosId() const { return impl_->eos; }
std::int32_t HfTokenizer::unkId() const { return impl_->unk; }

std::optional<std::int32_t> HfTokenizer::tokenId(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  return impl_->model->idOf(token);
}

std::string HfTokenizer::tokenText(std::int32_t id) const {
  if (const text::AddedToken* a = impl_->addedToken(id)) return a->content;
  if (const std::string* token = impl_->model->tokenOf(id)) return *token;
  throw std::out_of_range(fmt::format("token id {} is outside the vocabulary", id));
}

bool HfTokenizer::isSpecial(std::int32_t id) const {
  const text::AddedToken* a = impl_->addedToken(id);
  return a != nullptr && a->special;
}

}  // namespace astraflow
