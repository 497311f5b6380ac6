// `astraflow tokenize` and `astraflow score`: JSON lines on stdin encoded with a tokenizer.json (through the chat
// template with --chat), or scored with a model folder's log-probability of every next token.
#include "apps/text_commands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "apps/json_lines.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"

namespace astraflow {

struct ScoreArgs {
  std::string model;
};

struct TokenizeArgs {
  std::string tokenizer;
  bool no_special_tokens = false;
  bool chat = false;
};

namespace {

using json = nlohmann::ordered_json;  // key order matters: templates print tools with tojson

std::string idsLine(const std::vector<std::int32_t>& ids) {
  std::string line = "{\"ids\": [";
  for (std::size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(line), "{}{}", i ? ", " : "", ids[i]);
  line += "]}";
  return line;
}

// --chat: {"messages": [...], "tools": [...], "add_generation_prompt": bool, other template
// variables...} rendered with the folder's chat template, then encoded as apply_chat_template
// (tokenize=True) does: without the post-processor's special tokens (the template has them).
std::vector<std::int32_t> encodeChat(const HfTokenizer& tokenizer, const ChatTemplate& tpl, const json& line) {
  if (!line.is_object() || !line.contains("messages")) throw Error("a --chat line is {\"messages\": [...], ...}");
  ChatOptions options;
  for (const auto& [key, value] : line.items()) {
    if (key == "tools")
      options.tools = value;
    else if (key == "add_generation_prompt")
      options.add_generation_prompt = value.is_boolean() && value.get<bool>();
    else if (key != "messages")
      options.extra[key] = value;
  }
  return tokenizer.encode(tpl.render(line["messages"], options), false);
}

// One input per line of stdin (a JSON string, or with --chat a conversation), one {"ids": [...]}
// line per input on stdout, in order. A line that cannot be encoded (not JSON, not UTF-8, a
// template that raises) gets an {"error": ...} line in its place, so the outputs stay aligned
// with the inputs; the exit code is then 3.
int tokenizeCommand(const TokenizeArgs& a) {
  std::unique_ptr<HfTokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> tpl;
  try {
    tokenizer = HfTokenizer::load(a.tokenizer);
    if (a.chat) {
      const std::filesystem::path p(a.tokenizer);
      tpl = std::make_unique<ChatTemplate>(ChatTemplate::load(std::filesystem::is_directory(p) ? p : p.parent_path()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
  return answerJsonLines("tokenize", [&](const json& input) {
    if (tpl) return idsLine(encodeChat(*tokenizer, *tpl, input));
    if (!input.is_string()) throw Error("the line is not a JSON string");
    return idsLine(tokenizer->encode(input.get<std::string>(), !a.no_special_tokens));
  });
}

// One input per line of stdin, {"tokens": [...]} or {"text": "..."} (encoded with the folder's
// tokenizer.json, its special tokens included); one {"tokens": [...], "logprobs": [...]} line per
// input: logprobs[t-1] = log p(tokens[t] | tokens[<t]) under the model (float32, the full causal
// forward the trainer uses). Bad lines get an {"error": ...} line in their place; exit code 3.
int scoreCommand(const ScoreArgs& a) {
  std::unique_ptr<HfTokenizer> tokenizer;
  std::optional<PolicyModel> model;
  try {
    const ModelConfig config = readHfModelConfig(a.model).model;
    model.emplace(config);
    loadHfWeights(**model, a.model);
    (*model)->eval();
    if (std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json"))
      tokenizer = HfTokenizer::load(a.model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
  const ModelConfig& m = (*model)->config();
  torch::NoGradGuard no_grad;
  return answerJsonLines("score", [&](const json& input) {
    std::vector<std::int64_t> tokens;
    if (input.is_object() && input.contains("tokens")) {
      tokens = input["tokens"].get<std::vector<std::int64_t>>();
    } else if (input.is_object() && input.contains("text") && input["text"].is_string()) {
      if (!tokenizer) throw Error("the model folder has no tokenizer.json: give {\"tokens\": [...]}");
      for (std::int32_t id : tokenizer->encode(input["text"].get<std::string>(), true)) tokens.push_back(id);
    } else {
      throw Error("a line is {\"tokens\": [...]} or {\"text\": \"...\"}");
    }
    if (tokens.empty()) throw Error("no tokens");
    if (static_cast<int>(tokens.size()) > m.max_seq_len)
      throw Error(fmt::format("{} tokens, past the model's {} positions", tokens.size(), m.max_seq_len));
    for (std::int64_t id : tokens)
      if (id < 0 || id >= m.vocab_size)
        throw Error(fmt::format("token {} is outside the vocabulary ({})", id, m.vocab_size));
    const auto n = static_cast<std::int64_t>(tokens.size());
    const torch::Tensor lp = sequenceLogProbs(**model, torch::tensor(tokens, torch::kLong).unsqueeze(0),
                                              torch::tensor({n}, torch::kLong))[0];
    std::string out = json{{"tokens", tokens}}.dump();
    out.pop_back();
    out += ", \"logprobs\": [";
    for (std::int64_t t = 1; t < n; ++t) out += fmt::format("{}{:.9g}", t > 1 ? ", " : "", lp[t].item<double>());
    return out + "]}";
  });
}

}  // namespace

TextCommands addTextCommands(CLI::App& app) {
  TextCommands c;
  c.tokenize_args = std::make_shared<TokenizeArgs>();
  TokenizeArgs& a = *c.tokenize_args;
  auto* cmd = app.add_subcommand("tokenize",
                                 "encode stdin (one JSON string per line) with a tokenizer.json; one {\"ids\": [...]} "
                                 "line per input");
  cmd->add_option("--tokenizer", a.tokenizer, "a tokenizer.json, or the model folder holding one")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_flag("--chat", a.chat,
                "each line is {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...}, "
                "rendered with the folder's chat template first");
  cmd->add_flag("--no-special-tokens", a.no_special_tokens,
                "leave out the post-processor's special tokens (Llama-3's <|begin_of_text|>)");
  c.tokenize = cmd;

  c.score_args = std::make_shared<ScoreArgs>();
  auto* score = app.add_subcommand("score",
                                   "log-probability of every next token under a Hugging Face model folder; stdin: one "
                                   "{\"tokens\": [...]} or {\"text\": \"...\"} per line");
  score->add_option("--model", c.score_args->model, "the model folder (config.json, safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  c.score = score;
  return c;
}

int TextCommands::run() const {
  if (tokenize && *tokenize) return tokenizeCommand(*tokenize_args);
  if (score && *score) return scoreCommand(*score_args);
  return -1;
}

}  // namespace astraflow
