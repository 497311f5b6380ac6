// Reading a tokenizer.json: every component is checked against what hf_tokenizer.cpp
// implements, and anything else is refused by name, so a file is never encoded approximately.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "text/hf_tokenizer_impl.hpp"
#include "text/json_file.hpp"
#include "text/json_reader.hpp"
#include "text/pipeline_load.hpp"

namespace astraflow {
namespace {

using nlohmann::json;
using Reader = text::JsonReader;

std::unique_ptr<text::BpeModel> readModel(const Reader& r, const json& j) {
  const std::string type = j.contains("type") ? r.typeOf(j, "model") : "BPE";
  if (type != "BPE") r.unsupported("model", type, "BPE");
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].get<double>() > 0.0)
    r.fail("model", "dropout is set: BPE dropout is random, astraflow encodes deterministically");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (j.contains(key) && !j[key].is_null() && !j[key].get<std::string>().empty())
      r.fail("model", fmt::format("{} is not supported", key));
  }
  if (!j.contains("vocab") || !j["vocab"].is_object()) r.fail("model", "has no \"vocab\" object");
  text::TokenIds vocab;
  vocab.reserve(j["vocab"].size());
  for (const auto& [token, id] : j["vocab"].items()) {
    if (!id.is_number_integer()) r.fail("model.vocab", fmt::format("entry {} has no integer id", json(token).dump()));
    vocab.emplace(token, id.get<std::int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& list = j.value("merges", json::array());
  merges.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.fail("model.merges", fmt::format("merge {} ({}) is not two tokens split by one space", i, m.dump()));
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail("model.merges", fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", i));
    }
  }
  text::BpeOptions options;
  options.ignore_merges = r.flag(j, "ignore_merges", false);
  options.fuse_unk = r.flag(j, "fuse_unk", false);
  options.byte_fallback = r.flag(j, "byte_fallback", false);
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    const auto it = vocab.find(j["unk_token"].get<std::string>());
    if (it == vocab.end()) r.fail("model", "unk_token is not in the vocabulary");
    options.unk_id = it->second;
  }
  try {
    return std::make_unique<text::BpeModel>(std::move(vocab), merges, options);
  } catch (const Error& e) {
    r.fail("model", e.what());
  }
}

void readAddedTokens(const Reader& r, const json& j, HfTokenizer::Impl& t) {
  if (j.is_null()) return;
  if (!j.is_array()) r.fail("added_tokens", "is not a list");
  t.added.reserve(j.size());
  for (const json& a : j) {
    if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
      r.fail("added_tokens", "an entry has no id or content");
    text::AddedToken token;
    token.id = a["id"].get<std::int32_t>();
    token.content = a["content"].get<std::string>();
    token.single_word = r.flag(a, "single_word", false);
    token.lstrip = r.flag(a, "lstrip", false);
    token.rstrip = r.flag(a, "rstrip", false);
    token.normalized = r.flag(a, "normalized", true);
    token.special = r.flag(a, "special", false);
    if (token.content.empty()) r.fail("added_tokens", fmt::format("token {} has empty content", token.id));
    unicode::requireUtf8(token.content);
    t.added_by_id[token.id] = t.added.size();
    t.added_by_content[token.content] = token.id;
    t.added.push_back(std::move(token));
  }
  std::vector<std::string> raw, normalized;
  std::vector<const text::AddedToken*> raw_tokens, normalized_tokens;
  for (const text::AddedToken& token : t.added) {
    if (token.normalized) {
      std::string spelling = token.content;
      text::normalizeAll(t.normalizers, spelling);
      normalized.push_back(std::move(spelling));
      normalized_tokens.push_back(&token);
    } else {
      raw.push_back(token.content);
      raw_tokens.push_back(&token);
    }
  }
  t.raw_matcher = text::AddedTokenMatcher(std::move(raw), std::move(raw_tokens));
  t.normalized_matcher = text::AddedTokenMatcher(std::move(normalized), std::move(normalized_tokens));
}

void readTemplate(const Reader& r, const json& j, HfTokenizer::Impl& t) {
  const json& specials = j.value("special_tokens", json::object());
  bool seen_text = false;
  for (const json& item : j.value("single", json::array())) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A")
        r.fail("post_processor", "the single template names a sequence other than A");
      if (seen_text) r.fail("post_processor", "the single template holds the sequence twice");
      seen_text = true;
    } else if (item.contains("SpecialToken")) {
      const std::string name = item["SpecialToken"].value("id", "");
      if (!specials.contains(name))
        r.fail("post_processor", fmt::format("special token '{}' is not in special_tokens", name));
      for (const json& id : specials[name].value("ids", json::array()))
        (seen_text ? t.suffix_ids : t.prefix_ids).push_back(id.get<std::int32_t>());
    } else {
      r.fail("post_processor", "a template item is neither Sequence nor SpecialToken");
    }
  }
  if (!seen_text) r.fail("post_processor", "the single template has no $A");
}

void readPostProcessor(const Reader& r, const json& j, HfTokenizer::Impl& t) {
  if (j.is_null()) return;
  const std::string type = r.typeOf(j, "post_processor");
  if (type == "Sequence") {
    for (const json& p : j.value("processors", json::array())) readPostProcessor(r, p, t);
  } else if (type == "TemplateProcessing") {
    if (!t.prefix_ids.empty() || !t.suffix_ids.empty()) r.fail("post_processor", "two templates");
    readTemplate(r, j, t);
  } else if (type != "ByteLevel") {  // ByteLevel only trims offsets: ids are unchanged
    r.unsupported("post_processor", type, "ByteLevel, TemplateProcessing, Sequence of them");
  }
}

// tokenizer_config.json names special tokens by content, as a string or {"content": ...}.
std::int32_t configTokenId(const HfTokenizer::Impl& t, const json& config, const char* key) {
  if (!config.contains(key)) return -1;
  const json& v = config[key];
  std::string content;
  if (v.is_string())
    content = v.get<std::string>();
  else if (v.is_object() && v.contains("content") && v["content"].is_string())
    content = v["content"].get<std::string>();
  else
    return -1;
  if (const auto it = t.added_by_content.find(content); it != t.added_by_content.end()) return it->second;
  return t.model->idOf(content).value_or(-1);
}

}  // namespace

std::unique_ptr<HfTokenizer::Impl> loadHfTokenizerImpl(const std::filesystem::path& path) {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "tokenizer.json" : path;
  const json j = text::readJsonFile(file);
  const Reader r(file);
  if (!j.is_object() || !j.contains("model")) r.fail("top level", "no \"model\": this is not a tokenizer.json");
  for (const char* key : {"truncation", "padding"}) {
    if (j.contains(key) && !j[key].is_null())
      r.fail(key, "is set; astraflow encodes whole texts (set it to null, and pad or cut in the caller)");
  }
  auto t = std::make_unique<HfTokenizer::Impl>();
  t->file = file;
  text::readNormalizer(r, j.value("normalizer", json()), t->normalizers);
  text::readPreTokenizer(r, j.value("pre_tokenizer", json()), t->pre_tokenizer);
  t->model = readModel(r, j["model"]);
  readAddedTokens(r, j.value("added_tokens", json()), *t);
  readPostProcessor(r, j.value("post_processor", json()), *t);
  t->has_decoder = !j.value("decoder", json()).is_null();
  text::readDecoder(r, j.value("decoder", json()), t->decoders);
  t->vocab_size = t->model->idBound();
  for (const text::AddedToken& a : t->added) t->vocab_size = std::max(t->vocab_size, a.id + 1);
  for (const auto* ids : {&t->prefix_ids, &t->suffix_ids})
    for (std::int32_t id : *ids)
      if (id < 0 || id >= t->vocab_size)
        r.fail("post_processor", fmt::format("special token id {} is outside the vocabulary", id));

  const std::filesystem::path config_file = file.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_file)) {
    const json config = text::readJsonFile(config_file);
    t->bos = configTokenId(*t, config, "bos_token");
    t->eos = configTokenId(*t, config, "eos_token");
    t->pad = configTokenId(*t, config, "pad_token");
    t->unk = configTokenId(*t, config, "unk_token");
  }
  return t;
}

}  // namespace astraflow
