// Encoding and decoding of a loaded tokenizer.json, step for step as `tokenizers` does it:
// added tokens are split off the raw text, the rest is normalised, split off the normalised
// added tokens, pre-tokenized, byte-level mapped (where the file says so) and BPE-merged; the
// post-processor's template wraps the ids. Decoding runs the decoders over the token strings.
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
  std::vector<text::Piece> pieces, next_pieces;
  text::PreTokenizeScratch pre;
  std::vector<std::string_view> byte_level_pieces;
  text::SplitScratch split;
  std::string prefixed, word;
};

// One pre-tokenized piece through the ByteLevel step, if any, and the model.
void encodeWordPieces(const Impl& t, std::string_view piece, Scratch& s, std::vector<std::int32_t>& ids) {
  if (piece.empty()) return;  // tokenizers drops empty pieces before anything is prepended
  const text::ByteLevelStep& byte_level = t.pre_tokenizer.byte_level;
  if (!byte_level.enabled) {
    t.model->encodeWord(piece, ids);
    return;
  }
  std::string_view text = piece;
  if (byte_level.add_prefix_space && piece.front() != ' ') {
    s.prefixed.assign(1, ' ');
    s.prefixed.append(piece);
    text = s.prefixed;
  }
  auto emit = [&](std::string_view sub) {
    s.word.clear();
    text::appendByteSymbols(sub, s.word);
    t.model->encodeWord(s.word, ids);
  };
  if (!byte_level.use_regex) {
    emit(text);
    return;
  }
  s.byte_level_pieces.clear();
  text::splitPieces(text::SplitRule::Gpt2, text, s.byte_level_pieces, s.split);
  for (std::string_view sub : s.byte_level_pieces) emit(sub);
}

// Normalised text between added tokens: the pre-tokenizers in order, then the model per piece.
void encodePlain(const Impl& t, text::Piece text, Scratch& s, std::vector<std::int32_t>& ids) {
  s.pieces.assign(1, text);
  for (const auto& step : t.pre_tokenizer.steps) {
    s.next_pieces.clear();
    for (const text::Piece& piece : s.pieces) step->split(piece, s.pre, s.next_pieces);
    std::swap(s.pieces, s.next_pieces);
  }
  for (const text::Piece& piece : s.pieces) encodeWordPieces(t, piece.text, s, ids);
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
    text::normalizeAll(t.normalizers, normalized);
    s.normalized.clear();
    t.normalized_matcher.split(normalized, s.normalized);
    // Metaspace's prepend_scheme "first" asks whether a piece begins the input text.
    const bool raw_at_start = raw.text.data() == text.data();
    for (const text::Segment& seg : s.normalized) {
      if (seg.token != nullptr)
        ids.push_back(seg.token->id);
      else
        encodePlain(t, {seg.text, raw_at_start && seg.text.data() == normalized.data()}, s, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), t.suffix_ids.begin(), t.suffix_ids.end());
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (const text::AddedToken* a = t.addedToken(id)) {
      if (!(skip_special_tokens && a->special)) tokens.push_back(a->content);
    } else if (const std::string* token = t.model->tokenOf(id)) {
      tokens.push_back(*token);
    } else {
      throw Error(fmt::format("{}: id {} is neither a vocabulary entry nor an added token", t.file.string(), id));
    }
  }
  std::string out;
  if (!t.has_decoder) {
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const auto& decoder : t.decoders) decoder->apply(tokens);
  for (const std::string& token : tokens) out += token;
  return out;
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
