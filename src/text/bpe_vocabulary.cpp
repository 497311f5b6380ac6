// readBpeVocabulary: a byte-level BPE tokenizer.json flattened into the vocabulary GGUF carries (every id's spelling
// and TokenKind, the merges, llama.cpp's name of the pre-tokenizer split), for `astraflow export-gguf`.
#include "astraflow/text/bpe_vocabulary.hpp"

#include <fmt/format.h>

#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "text/json_file.hpp"
#include "text/split_rules.hpp"

namespace astraflow {
namespace {

using nlohmann::json;

void leafPreTokenizers(const json& pre, std::vector<json>& out) {
  if (pre.is_null()) return;
  if (pre.value("type", "") != "Sequence") {
    out.push_back(pre);
    return;
  }
  for (const json& p : pre.value("pretokenizers", json::array())) leafPreTokenizers(p, out);
}

// llama.cpp's name for the pre-tokenizer's split (tokenizer.ggml.pre): the Split's, when it is
// one of the three patterns llama.cpp names here, else ByteLevel's own GPT-2 regex. Any other
// split (another pattern, several Splits, Metaspace, ...) is refused: llama.cpp would split by
// the wrong rule under a guessed name.
std::string preName(const json& pre, const std::filesystem::path& file) {
  std::vector<json> leaves;
  leafPreTokenizers(pre, leaves);
  std::vector<json> splits;
  bool byte_level_regex = false;
  for (const json& p : leaves) {
    if (p.value("type", "") == "ByteLevel")
      byte_level_regex = p.value("use_regex", true);
    else
      splits.push_back(p);
  }
  if (splits.empty()) return byte_level_regex ? "gpt-2" : "";
  const json& split = splits.front();
  const json pattern = split.value("pattern", json::object());
  const auto rule = split.value("type", "") == "Split" && split.value("behavior", "") == "Isolated" &&
                            !split.value("invert", false) && pattern.value("Regex", json()).is_string()
                        ? text::splitRuleOf(pattern["Regex"].get<std::string>())
                        : std::nullopt;
  if (splits.size() != 1 || !rule)
    throw Error(
        fmt::format("{}: GGUF export names llama.cpp's pre-tokenizer only for the Qwen2, Llama-3 and GPT-2 "
                    "splits, and this file's pre-tokenizer is another ({})",
                    file.string(), pre.dump()));
  switch (*rule) {
    case text::SplitRule::Qwen2: return "qwen2";
    case text::SplitRule::Llama3: return "llama-bpe";
    case text::SplitRule::Gpt2: break;
  }
  return "gpt-2";
}

bool byteLevel(const json& pre) {
  if (pre.is_null()) return false;
  if (pre.value("type", "") == "ByteLevel") return true;
  for (const json& p : pre.value("pretokenizers", json::array()))
    if (byteLevel(p)) return true;
  return false;
}

}  // namespace

BpeVocabulary readBpeVocabulary(const std::filesystem::path& folder, std::int32_t vocab_size) {
  const std::filesystem::path file = folder / "tokenizer.json";
  const auto tokenizer = HfTokenizer::load(file);  // refuses what is not supported, by name
  const json j = text::readJsonFile(file);
  if (!byteLevel(j.value("pre_tokenizer", json())))
    throw Error(
        fmt::format("{}: GGUF export needs a byte-level BPE tokenizer (a ByteLevel pre-tokenizer)", file.string()));
  if (tokenizer->vocabSize() > vocab_size)
    throw Error(fmt::format("{}: {} token ids, past the model's {} embedding rows", file.string(),
                            tokenizer->vocabSize(), vocab_size));
  BpeVocabulary v;
  v.tokens.resize(static_cast<std::size_t>(vocab_size));
  v.kinds.assign(static_cast<std::size_t>(vocab_size), TokenKind::Unused);
  for (std::int32_t id = 0; id < vocab_size; ++id) v.tokens[static_cast<std::size_t>(id)] = fmt::format("[PAD{}]", id);
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    v.tokens[id.get<std::size_t>()] = token;
    v.kinds[id.get<std::size_t>()] = TokenKind::Normal;
  }
  for (const json& a : j.value("added_tokens", json::array())) {
    const auto id = a["id"].get<std::size_t>();
    v.tokens[id] = a["content"].get<std::string>();
    v.kinds[id] = a.value("special", false) ? TokenKind::Control : TokenKind::UserDefined;
  }
  for (const json& m : j["model"].value("merges", json::array()))
    v.merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  v.pre = preName(j.value("pre_tokenizer", json()), file);
  v.add_bos = !tokenizer->encode("", true).empty();
  v.chat_template = readChatTemplateSource(folder);
  return v;
}

}  // namespace astraflow
