#pragma once
// Chat templates: a model folder's Jinja chat template rendered as transformers'
// apply_chat_template(messages, tools=..., add_generation_prompt=..., tokenize=False, **extra)
// renders it (the ChatML family with Qwen3's thinking switch, Llama-3). The interpreter
// implements the Jinja subset chat templates use (docs/models.md lists it); a template with a
// tag, filter or test outside it is refused by name when it is loaded, never approximated.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace astraflow {

// The folder's chat template text: chat_template.jinja, else tokenizer_config.json's
// "chat_template" (a string, or the entry named "default" of a list); empty when it has none.
// Throws Error naming tokenizer_config.json when it is not JSON or the entry has another form.
std::string readChatTemplateSource(const std::filesystem::path& folder);

struct ChatOptions {
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools;                                     // null: no tools
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // e.g. {"enable_thinking": false}
};

class ChatTemplate {
 public:
  // readChatTemplateSource(folder), compiled; the special tokens tokenizer_config.json names (bos_token, eos_token,
  // pad_token, unk_token) become template variables as transformers passes them. Throws Error
  // naming the file when there is no template or it cannot be parsed.
  static ChatTemplate load(const std::filesystem::path& folder);
  // A template given as text, with the special-token variables in `special_tokens` (an object).
  static ChatTemplate fromSource(const std::string& source,
                                 const nlohmann::ordered_json& special_tokens = nlohmann::ordered_json::object());

  // `messages`: a list of {"role": ..., "content": ..., ...} as the openai and transformers APIs
  // take them. Throws Error when the template raises or meets a value it cannot handle.
  std::string render(const nlohmann::ordered_json& messages, const ChatOptions& options = {}) const;

  // The text that follows an assistant turn's end-of-turn token (eos_token) to add `message` (a
  // tool reply, a user's follow-up) and open the next assistant turn: multi-turn episodes append
  // it to what the policy generated. Taken from the template's rendering of a fixed short
  // conversation with and without the message; throws Error naming the file when the template
  // ends no turn with eos_token or rewrites the conversation when a message of that role is added.
  std::string continuation(const nlohmann::ordered_json& message, const ChatOptions& options = {}) const;

  struct Impl;

 private:
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace astraflow
