#include "astraflow/text/bpe_vocabulary.hpp"

#include <fmt/format.h>

#include "astraflow/core/error.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "text/json_file.hpp"
#include "text/split_rules.hpp"

namespace astraflow {
namespace {

using nlohmann::json;

// The split rule of the pre-tokenizer (its Split, else ByteLevel's own regex); HfTokenizer::load
// has checked the file already, so anything else cannot occur here.
std::string preName(const json& pre) {
  if (pre.is_null()) return "";
  const std::string type = pre.value("type", "");
  if (type == "Sequence") {
    for (const json& p : pre.value("pretokenizers", json::array()))
      if (std::string name = preName(p); !name.empty()) return name;
    return "";
  }
  if (type == "Split") {
    const auto rule = text::splitRuleOf(pre["pattern"].value("Regex", ""));
    if (rule == text::SplitRule::Qwen2) return "qwen2";
    if (rule == text::SplitRule::Llama3) return "llama-bpe";
    return "gpt-2";
  }
  if (type == "ByteLevel" && pre.value("use_regex", true)) return "gpt-2";
  return "";
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
  v.pre = preName(j.value("pre_tokenizer", json()));
  v.add_bos = !tokenizer->encode("", true).empty();
  v.chat_template = readChatTemplateSource(folder);
  return v;
}

}  // namespace astraflow
