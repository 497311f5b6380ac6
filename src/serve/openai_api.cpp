// The OpenAI API subset (docs/rollout-backends.md): /v1/models, /v1/completions and
// /v1/chat/completions, with `n`, `stop`, `logprobs`, streaming as server-sent events, and vLLM's
// `return_tokens_as_token_ids`. Errors have the API's status codes and
// {"error": {"message", "type", "param", "code"}} bodies.
#include <fmt/format.h>

#include <algorithm>

#include "serve/serve_state.hpp"

namespace astraflow::serve_detail {

namespace {

enum class Kind { Completion, Chat };

// What one request asks for, after its fields were checked.
struct Ask {
  Kind kind = Kind::Completion;
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::string> prompt_texts;  // for text_offset
  int n = 1;
  SamplingOptions options;
  std::vector<std::string> stops;
  bool stream = false, include_usage = false;
  bool logprobs = false, token_ids = false, skip_special = true;
};

// The fields both endpoints take (commonSettings reads them), OpenAI's and vLLM's extensions.
constexpr const char* kCommonFields[] = {"model",
                                         "max_tokens",
                                         "temperature",
                                         "top_p",
                                         "n",
                                         "stream",
                                         "stream_options",
                                         "logprobs",
                                         "stop",
                                         "seed",
                                         "user",
                                         "frequency_penalty",
                                         "presence_penalty",
                                         "logit_bias",
                                         "return_tokens_as_token_ids",
                                         "ignore_eos",
                                         "min_tokens",
                                         "skip_special_tokens",
                                         "stop_token_ids"};

// A field neither in kCommonFields nor in the endpoint's own `more` is refused, as OpenAI does.
void refuseUnknown(const json& body, std::initializer_list<const char*> more) {
  for (const auto& [key, value] : body.items()) {
    const auto is = [&](const char* k) { return key == k; };
    if (std::none_of(std::begin(kCommonFields), std::end(kCommonFields), is) &&
        std::none_of(more.begin(), more.end(), is))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key);
  }
}

void neutral(const json& body, const char* name, double value) {
  if (body.contains(name) && !body[name].is_null() && !(body[name].is_number() && body[name].get<double>() == value))
    throw ApiError(400, fmt::format("'{}' is supported only as {}", name, value), name);
}

void checkModel(const ServeState& s, const json& body) {
  if (!body.contains("model") || !body["model"].is_string()) throw ApiError(400, "'model' is required", "model");
  if (body["model"].get<std::string>() != s.served_name)
    throw ApiError(404,
                   fmt::format("The model '{}' does not exist; this server serves '{}'",
                               body["model"].get<std::string>(), s.served_name),
                   "model", "model_not_found");
}

// The settings both endpoints share.
void commonSettings(const ServeState& s, const json& body, Ask& a, std::int64_t default_max_tokens) {
  checkModel(s, body);
  neutral(body, "frequency_penalty", 0);
  neutral(body, "presence_penalty", 0);
  const double t = numberField(body, "temperature", 1.0, 0.0, 2.0);
  a.options.greedy = t == 0.0;
  a.options.temperature = t == 0.0 ? 1.0 : t;
  a.options.top_p = numberField(body, "top_p", 1.0, 1e-6, 1.0);
  a.n = static_cast<int>(intField(body, "n", 1, 1, 16));
  a.options.max_new_tokens = static_cast<int>(intField(body, "max_tokens", default_max_tokens, 1, 1 << 20));
  a.options.min_new_tokens = static_cast<int>(intField(body, "min_tokens", 0, 0, 1 << 20));
  a.stops = stringsField(body, "stop", 4);
  a.stream = boolField(body, "stream", false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!a.stream) throw ApiError(400, "'stream_options' is allowed only with stream: true", "stream_options");
    if (!body["stream_options"].is_object())
      throw ApiError(400, "'stream_options' must be an object", "stream_options");
    a.include_usage = boolField(body["stream_options"], "include_usage", false);
  }
  a.options.stop_token_ids = stopTokenIds(s, body, "");
  a.options.banned_token_ids = bannedIds(s, body, "");
  a.skip_special = boolField(body, "skip_special_tokens", true);
  a.token_ids = boolField(body, "return_tokens_as_token_ids", false);
  if (!a.stops.empty() && !s.tokenizer) throw ApiError(400, "'stop' needs the model folder's tokenizer.json", "stop");
}

Ask completionAsk(const ServeState& s, const json& body) {
  refuseUnknown(body, {"prompt", "echo", "best_of", "suffix"});
  Ask a;
  commonSettings(s, body, a, 16);
  if (boolField(body, "echo", false)) throw ApiError(400, "'echo' is not supported", "echo");
  if (body.contains("suffix") && !body["suffix"].is_null()) throw ApiError(400, "'suffix' is not supported", "suffix");
  if (intField(body, "best_of", a.n, a.n, a.n) != a.n) throw ApiError(400, "'best_of' must equal 'n'", "best_of");
  a.logprobs = body.contains("logprobs") && !body["logprobs"].is_null();
  intField(body, "logprobs", 0, 0, 5);
  if (!body.contains("prompt") || body["prompt"].is_null()) throw ApiError(400, "'prompt' is required", "prompt");
  const json& p = body["prompt"];
  const auto vocab = s.queue->modelConfig().vocab_size;
  auto text = [&](const json& v) {
    if (!s.tokenizer) throw ApiError(400, "a text prompt needs the model folder's tokenizer.json", "prompt");
    a.prompt_texts.push_back(v.get<std::string>());
    a.prompts.push_back(s.tokenizer->encode(v.get<std::string>(), true));
  };
  if (p.is_string()) {
    text(p);
  } else if (p.is_array() && !p.empty() && p.front().is_number_integer()) {
    a.prompts.push_back(tokenIds(p, "prompt", vocab));
  } else if (p.is_array() && !p.empty()) {
    for (const auto& item : p) {
      if (item.is_string())
        text(item);
      else if (item.is_array())
        a.prompts.push_back(tokenIds(item, "prompt", vocab));
      else
        throw ApiError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of those",
                       "prompt");
    }
  } else {
    throw ApiError(400, "'prompt' must be a non-empty string or list", "prompt");
  }
  for (const auto& ids : a.prompts) checkPrompt(s, ids, "prompt");
  return a;
}

std::string contentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) throw ApiError(400, "a message's 'content' must be a string or a list of parts", "messages");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw ApiError(400, "only text content parts are supported", "messages");
    text += part["text"].get<std::string>();
  }
  return text;
}

Ask chatAsk(const ServeState& s, const json& body) {
  refuseUnknown(body,
                {"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "chat_template_kwargs"});
  if (!s.tokenizer || !s.chat_template)
    throw ApiError(400, "chat completions need the model folder's tokenizer.json and chat template", "messages");
  Ask a;
  a.kind = Kind::Chat;
  const auto context = s.queue->modelConfig().max_seq_len;
  json fields = body;
  if (body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null())
    fields["max_tokens"] = body["max_completion_tokens"];
  commonSettings(s, fields, a, context);
  a.logprobs = boolField(body, "logprobs", false);
  intField(body, "top_logprobs", 0, 0, 20);
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    throw ApiError(400, "'messages' must be a non-empty list", "messages");
  json messages = json::array();
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ApiError(400, "each message needs a 'role'", "messages");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      throw ApiError(400, fmt::format("unknown message role '{}'", role), "messages");
    json msg = m;
    msg["role"] = role == "developer" ? "system" : role;
    msg["content"] = contentText(m.contains("content") ? m["content"] : json(nullptr));
    messages.push_back(std::move(msg));
  }
  ChatOptions options;
  options.add_generation_prompt = true;
  if (body.contains("tools") && !body["tools"].is_null()) options.tools = body["tools"];
  if (body.contains("chat_template_kwargs") && body["chat_template_kwargs"].is_object())
    options.extra = body["chat_template_kwargs"];
  std::string rendered;
  try {
    rendered = s.chat_template->render(messages, options);
  } catch (const std::exception& e) {
    throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages");
  }
  a.prompt_texts.push_back(rendered);
  a.prompts.push_back(s.tokenizer->encode(rendered, false));
  checkPrompt(s, a.prompts.back(), "messages");
  return a;
}

const char* finishReason(const QueuedResult& r) { return r.finish == Finish::Length ? "length" : "stop"; }

json logprobsJson(const ServeState& s, const Ask& a, const std::vector<std::int32_t>& tokens,
                  const std::vector<float>& logprobs, std::size_t offset) {
  if (a.kind == Kind::Chat) {
    json content = json::array();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string t = tokenText(s, tokens[i], a.token_ids);
      std::vector<int> bytes;
      for (unsigned char c : t) bytes.push_back(c);
      content.push_back(
          {{"token", t}, {"logprob", logprobs[i]}, {"bytes", std::move(bytes)}, {"top_logprobs", json::array()}});
    }
    return {{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", logprobs},
              {"top_logprobs", nullptr},
              {"text_offset", json::array()}};
  for (auto id : tokens) {
    const std::string t = tokenText(s, id, a.token_ids);
    out["tokens"].push_back(t);
    out["text_offset"].push_back(offset);
    offset += t.size();
  }
  return out;
}

// One queued request per (prompt, sample), choice index = prompt * n + sample.
std::vector<QueuedRequest> requestsOf(const Ask& a) {
  std::vector<QueuedRequest> out;
  for (const auto& p : a.prompts)
    for (int j = 0; j < a.n; ++j) out.push_back(QueuedRequest{p, a.options, {}, {}});
  return out;
}

json usageOf(const Ask& a, std::size_t completion_tokens) {
  std::size_t prompt_tokens = 0;
  for (const auto& p : a.prompts) prompt_tokens += p.size();
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

void answerWhole(ServeState& s, const Ask& a, HttpResponse& res) {
  auto requests = requestsOf(a);
  std::vector<std::unique_ptr<TextStream>> texts;
  std::vector<std::future<QueuedResult>> futures;
  for (auto& q : requests) {
    texts.push_back(std::make_unique<TextStream>(s.tokenizer.get(), a.stops, a.skip_special));
    TextStream* ts = texts.back().get();
    if (!a.stops.empty()) q.on_token = [ts](std::int32_t token, float) { return ts->push(token); };
    futures.push_back(s.queue->submit(std::move(q)));
  }
  const bool chat = a.kind == Kind::Chat;
  json choices = json::array();
  std::size_t completion_tokens = 0;
  for (std::size_t i = 0; i < futures.size(); ++i) {
    const QueuedResult r = futures[i].get();
    if (r.finish == Finish::Abort)
      throw ApiError(500, r.nonfinite ? "the model produced NaN or inf logits" : "the generation was aborted", {}, {},
                     "internal_error");
    completion_tokens += r.tokens.size();
    const std::string text = texts[i]->matched() ? texts[i]->text()
                             : s.tokenizer       ? decodeIds(*s.tokenizer, r.tokens, a.skip_special)
                                                 : std::string();
    json choice = {{"index", i}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    else
      choice["text"] = text;
    const std::size_t offset = i / a.n < a.prompt_texts.size() ? a.prompt_texts[i / a.n].size() : 0;
    choice["logprobs"] = a.logprobs ? logprobsJson(s, a, r.tokens, r.logprobs, offset) : json(nullptr);
    choice["finish_reason"] = finishReason(r);
    choices.push_back(std::move(choice));
  }
  answerJson(res, json{{"id", s.newId(chat ? "chatcmpl" : "cmpl")},
                       {"object", chat ? "chat.completion" : "text_completion"},
                       {"created", s.created},
                       {"model", s.served_name},
                       {"choices", std::move(choices)},
                       {"usage", usageOf(a, completion_tokens)}});
}

// Server-sent events: `data: <chunk>\n\n` per piece, `data: [DONE]\n\n` at the end.
void answerStream(ServeState& s, const Ask& a, HttpResponse& res) {
  auto channel = std::make_shared<EventChannel>();
  auto requests = requestsOf(a);
  const std::size_t count = requests.size();
  for (std::size_t i = 0; i < count; ++i) {
    auto ts = std::make_shared<TextStream>(s.tokenizer.get(), a.stops, a.skip_special);
    requests[i].on_token = [ts, channel, i](std::int32_t token, float logprob) {
      const bool go_on = ts->push(token);
      channel->push(StreamEvent{i, ts->take(false), {token}, {logprob}, false, {}});
      return go_on && !channel->cancelled();
    };
    requests[i].on_done = [ts, channel, i](const QueuedResult& r) {
      channel->push(StreamEvent{i, ts->take(true), {}, {}, true, r.finish == Finish::Length ? "length" : "stop"});
    };
    s.queue->submit(std::move(requests[i]));
  }
  const bool chat = a.kind == Kind::Chat;
  const std::string id = s.newId(chat ? "chatcmpl" : "cmpl");
  res.content_type = "text/event-stream";
  res.stream = [&s, a, channel, count, chat, id](const HttpChunkWriter& write) {
    std::size_t completion_tokens = 0;
    std::vector<std::size_t> offsets(count, 0);
    auto send = [&](const json& chunk) {
      if (!write("data: " + chunk.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n")) channel->cancel();
      return !channel->cancelled();
    };
    auto chunkOf = [&](json choices) {
      return json{{"id", id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", s.created},
                  {"model", s.served_name},
                  {"choices", std::move(choices)}};
    };
    if (chat) {
      json first = json::array();
      for (std::size_t i = 0; i < count; ++i)
        first.push_back({{"index", i},
                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr}});
      if (!send(chunkOf(std::move(first)))) return;
    }
    while (auto e = channel->next(count)) {
      completion_tokens += e->tokens.size();
      if (!e->finished && e->text.empty() && !a.logprobs) continue;
      json choice = {{"index", e->choice}};
      if (chat)
        choice["delta"] = e->finished && e->text.empty() ? json::object() : json{{"content", e->text}};
      else
        choice["text"] = e->text;
      choice["logprobs"] = a.logprobs && !e->tokens.empty()
                               ? logprobsJson(s, a, e->tokens, e->logprobs, offsets[e->choice])
                               : json(nullptr);
      for (auto t : e->tokens) offsets[e->choice] += tokenText(s, t, a.token_ids).size();
      choice["finish_reason"] = e->finished ? json(e->finish_reason) : json(nullptr);
      if (!send(chunkOf(json::array({std::move(choice)})))) return;
    }
    if (a.include_usage) {
      json usage = chunkOf(json::array());
      usage["usage"] = usageOf(a, completion_tokens);
      if (!send(usage)) return;
    }
    write("data: [DONE]\n\n");
  };
}

void completions(ServeState& s, const HttpRequest& req, HttpResponse& res, Kind kind) {
  const json body = parseBody(s, req);
  const Ask a = kind == Kind::Chat ? chatAsk(s, body) : completionAsk(s, body);
  std::vector<std::size_t> prompt_tokens;
  for (const auto& p : a.prompts) prompt_tokens.push_back(p.size());
  checkRequestTokens(s, prompt_tokens, a.n, a.options.max_new_tokens);
  if (a.stream)
    answerStream(s, a, res);
  else
    answerWhole(s, a, res);
}

}  // namespace

void addOpenAiRoutes(ServeState& s) {
  s.http->get("/v1/models", [&s](const HttpRequest&, HttpResponse& res) {
    answerJson(res, json{{"object", "list"},
                         {"data", json::array({{{"id", s.served_name},
                                                {"object", "model"},
                                                {"created", s.created},
                                                {"owned_by", "astraflow"},
                                                {"max_model_len", s.queue->modelConfig().max_seq_len}}})}});
  });
  s.http->post("/v1/completions", [&s](const HttpRequest& req, HttpResponse& res) {
    guarded(s, res, [&] { completions(s, req, res, Kind::Completion); });
  });
  s.http->post("/v1/chat/completions", [&s](const HttpRequest& req, HttpResponse& res) {
    guarded(s, res, [&] { completions(s, req, res, Kind::Chat); });
  });
}

}  // namespace astraflow::serve_detail
