// ChatTemplate: a model folder's Jinja chat template (chat_template.jinja or tokenizer_config.json's) compiled with
// its special-token variables and rendered as transformers' apply_chat_template renders it.
#include "astraflow/text/chat_template.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "astraflow/core/error.hpp"
#include "text/jinja_ast.hpp"

namespace astraflow {

struct ChatTemplate::Impl {
  jinja::Template tpl;
  jinja::Object special_tokens;
  std::string eos_token;  // "" when the folder names none
  std::string where;      // the file, for messages
};

namespace {

using nlohmann::ordered_json;

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot be read", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tokenizer_config.json names special tokens as strings or {"content": ...}.
ordered_json specialTokens(const ordered_json& config) {
  ordered_json out = ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!config.contains(key)) continue;
    const ordered_json& v = config[key];
    if (v.is_string())
      out[key] = v;
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      out[key] = v["content"];
  }
  return out;
}

std::shared_ptr<ChatTemplate::Impl> compile(const std::string& source, const ordered_json& special_tokens,
                                            const std::string& where) {
  auto impl = std::make_shared<ChatTemplate::Impl>();
  try {
    impl->tpl = jinja::parseTemplate(source);
  } catch (const Error& e) {
    throw Error(where.empty() ? std::string(e.what()) : fmt::format("{}: {}", where, e.what()));
  }
  impl->special_tokens = jinja::fromJson(special_tokens).asObject();
  impl->eos_token = special_tokens.value("eos_token", "");
  impl->where = where.empty() ? "the chat template" : where;
  return impl;
}

}  // namespace

namespace {

// tokenizer_config.json of the folder, or an empty object when there is none.
ordered_json readConfig(const std::filesystem::path& folder) {
  const std::filesystem::path config_file = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(config_file)) return ordered_json::object();
  try {
    return ordered_json::parse(readFile(config_file));
  } catch (const ordered_json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", config_file.string(), e.what()));
  }
}

std::string templateSource(const std::filesystem::path& folder, const ordered_json& config) {
  if (std::filesystem::exists(folder / "chat_template.jinja")) return readFile(folder / "chat_template.jinja");
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return "";
  const ordered_json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  for (const auto& entry : t.is_array() ? t : ordered_json::array())
    if (entry.value("name", "") == "default" && entry.contains("template") && entry["template"].is_string())
      return entry["template"].get<std::string>();
  throw Error(fmt::format("{}: \"chat_template\" is neither a string nor a list with a \"default\" entry",
                          (folder / "tokenizer_config.json").string()));
}

}  // namespace

std::string readChatTemplateSource(const std::filesystem::path& folder) {
  return templateSource(folder, readConfig(folder));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& folder) {
  const ordered_json config = readConfig(folder);
  const std::string source = templateSource(folder, config);
  const std::filesystem::path config_file = folder / "tokenizer_config.json";
  if (source.empty())
    throw Error(fmt::format("{}: no chat template (neither chat_template.jinja nor a \"chat_template\" in {})",
                            folder.string(), config_file.filename().string()));
  const bool from_jinja = std::filesystem::exists(folder / "chat_template.jinja");
  return ChatTemplate(
      compile(source, specialTokens(config), (from_jinja ? folder / "chat_template.jinja" : config_file).string()));
}

ChatTemplate ChatTemplate::fromSource(const std::string& source, const ordered_json& special_tokens) {
  return ChatTemplate(compile(source, special_tokens, ""));
}

std::string ChatTemplate::render(const ordered_json& messages, const ChatOptions& options) const {
  if (!messages.is_array()) throw Error("chat template: messages must be a list");
  jinja::Object variables = impl_->special_tokens;
  variables.emplace_back("messages", jinja::fromJson(messages));
  variables.emplace_back("tools", jinja::fromJson(options.tools));
  variables.emplace_back("documents", nullptr);
  variables.emplace_back("add_generation_prompt", options.add_generation_prompt);
  if (!options.extra.is_object()) throw Error("chat template: the extra template variables must be an object");
  for (const auto& [k, v] : options.extra.items()) variables.emplace_back(k, jinja::fromJson(v));
  return jinja::renderTemplate(impl_->tpl, variables);
}

std::string ChatTemplate::continuation(const ordered_json& message, const ChatOptions& options) const {
  // Rendered after a fixed short conversation, never after the caller's own: templates rewrite
  // earlier turns when one is added (Qwen3's drops an earlier assistant turn's empty <think>
  // block), and a context must stay what the policy generated.
  const ordered_json base =
      ordered_json::array({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}});
  ChatOptions closed = options;
  closed.add_generation_prompt = false;
  const std::string before = render(base, closed);
  ordered_json extended = base;
  extended.push_back(message);
  ChatOptions open = options;
  open.add_generation_prompt = true;
  const std::string after = render(extended, open);
  const std::size_t eos = impl_->eos_token.empty() ? std::string::npos : before.rfind(impl_->eos_token);
  if (eos == std::string::npos)
    throw Error(
        fmt::format("{}: a turn does not end with eos_token '{}' (tokenizer_config.json), so a conversation "
                    "cannot be continued after a generated turn",
                    impl_->where, impl_->eos_token));
  if (!after.starts_with(before))
    throw Error(
        fmt::format("{}: adding a '{}' message rewrites the conversation before it, so a conversation cannot "
                    "be continued with one",
                    impl_->where, message.value("role", "")));
  return before.substr(eos + impl_->eos_token.size()) + after.substr(before.size());
}

}  // namespace astraflow
