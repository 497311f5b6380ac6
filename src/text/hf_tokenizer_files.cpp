// The tokenizer files init-model and export-hf write: writeByteLevelTokenizer (256 byte symbols and ChatML tokens),
// writeTaskTokenizer (the built-in task vocabulary as a WordLevel tokenizer.json) and copyTokenizer.
#include "astraflow/text/hf_tokenizer_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "astraflow/core/error.hpp"
#include "astraflow/text/tokenizer.hpp"
#include "text/byte_level.hpp"
#include "text/json_file.hpp"
#include "text/split_rules.hpp"

namespace astraflow {

namespace {

using nlohmann::json;

json addedToken(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

json byteLevel() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

const char* kChatmlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

void writeJson(const std::filesystem::path& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot be written", path.string()));
}

}  // namespace

HfTokenizerSummary writeByteLevelTokenizer(const std::filesystem::path& folder) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[text::byteSymbol(static_cast<std::uint8_t>(b))] = b;
  json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {addedToken(256, "<|endoftext|>"), addedToken(257, "<|im_start|>"), addedToken(258, "<|im_end|>")}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(text::splitPattern(text::SplitRule::Qwen2))}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byteLevel()}}}},
      {"post_processor", byteLevel()},
      {"decoder", byteLevel()},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", json::array()}}}};
  writeJson(folder / "tokenizer.json", tokenizer);
  json config = {{"tokenizer_class", "Qwen2Tokenizer"},
                 {"add_bos_token", false},
                 {"add_prefix_space", false},
                 {"bos_token", nullptr},
                 {"eos_token", "<|im_end|>"},
                 {"pad_token", "<|endoftext|>"},
                 {"unk_token", nullptr},
                 {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
                 {"clean_up_tokenization_spaces", false},
                 {"split_special_tokens", false},
                 {"errors", "replace"},
                 {"model_max_length", 131072},
                 {"chat_template", kChatmlTemplate}};
  writeJson(folder / "tokenizer_config.json", config);
  return {259, -1, 258, 256};
}

HfTokenizerSummary writeTaskTokenizer(const Tokenizer& t, const std::filesystem::path& folder) {
  json vocab = json::object();
  json added = json::array();
  const std::set<std::int32_t> specials = {t.padId(), t.bosId(), t.eosId(), t.unkId()};
  for (std::int32_t id = 0; id < t.vocabSize(); ++id) {
    const std::string text = t.tokenText(id);
    vocab[text] = id;
    if (text.size() > 1) {
      json a = addedToken(id, text);
      a["special"] = specials.count(id) > 0;
      added.push_back(a);
    }
  }
  // Every character alone (the tags were split out first as added tokens); Fuse joins the
  // decoded pieces without the spaces WordLevel's default decoding would put between them.
  json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"Regex", "[\\s\\S]"}}}, {"behavior", "Isolated"}, {"invert", false}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Fuse"}}},
      {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", t.tokenText(t.unkId())}}}};
  writeJson(folder / "tokenizer.json", tokenizer);
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"pad_token", t.tokenText(t.padId())},
                 {"bos_token", t.tokenText(t.bosId())},          {"eos_token", t.tokenText(t.eosId())},
                 {"unk_token", t.tokenText(t.unkId())},          {"add_bos_token", false},
                 {"clean_up_tokenization_spaces", false}};
  writeJson(folder / "tokenizer_config.json", config);
  return {t.vocabSize(), t.bosId(), t.eosId(), t.padId()};
}

HfTokenizerSummary copyTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& folder) {
  const json t = text::readJsonFile(tokenizer_json);
  if (!t.is_object() || !t.contains("model") || !t["model"].is_object() || !t["model"].contains("vocab") ||
      !t["model"]["vocab"].is_object()) {
    throw Error(fmt::format("{}: not a tokenizer.json (no model.vocab object)", tokenizer_json.string()));
  }
  HfTokenizerSummary s;
  std::map<std::string, int> ids;
  for (const auto& [piece, id] : t["model"]["vocab"].items()) {
    if (!id.is_number_integer())
      throw Error(fmt::format("{}: vocab entry {} has no integer id", tokenizer_json.string(), json(piece).dump()));
    s.vocab_size = std::max(s.vocab_size, id.get<int>() + 1);
    ids[piece] = id.get<int>();
  }
  if (t.contains("added_tokens") && t["added_tokens"].is_array()) {
    for (const auto& a : t["added_tokens"]) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content")) continue;
      s.vocab_size = std::max(s.vocab_size, a["id"].get<int>() + 1);
      ids[a["content"].get<std::string>()] = a["id"].get<int>();
    }
  }
  std::filesystem::copy_file(tokenizer_json, folder / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    std::filesystem::copy_file(config_path, folder / "tokenizer_config.json",
                               std::filesystem::copy_options::overwrite_existing);
    const json c = text::readJsonFile(config_path);
    auto idOf = [&](const char* key) {
      if (!c.contains(key) || !c[key].is_string()) return -1;
      const auto it = ids.find(c[key].get<std::string>());
      return it == ids.end() ? -1 : it->second;
    };
    s.bos_token_id = idOf("bos_token");
    s.eos_token_id = idOf("eos_token");
    s.pad_token_id = idOf("pad_token");
  }
  return s;
}

}  // namespace astraflow
