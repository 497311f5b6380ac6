// SGLang's native API (docs/rollout-backends.md lists the fields): /generate with token ids or
// text, sampling_params and return_logprob; /update_weights_from_disk with weight_version;
// /get_model_info, /get_weight_version, /health, /health_generate.
#include <fmt/format.h>

#include <chrono>

#include "serve/serve_state.hpp"

namespace astraflow::serve_detail {

namespace {

// Sampling keys /generate takes. The penalties and top_k/min_p are accepted only at their
// neutral values: the engine does not compute them, and a value it would ignore is refused.
struct SglangSampling {
  SamplingOptions options;
  std::vector<std::string> stops;
  bool skip_special = true;
  bool no_stop_trim = false;
};

SglangSampling samplingOf(const ServeState& s, const json& p) {
  if (!p.is_object()) throw ApiError(400, "'sampling_params' must be an object", "sampling_params");
  static const char* known[] = {"temperature",
                                "logit_bias",
                                "top_p",
                                "top_k",
                                "min_p",
                                "max_new_tokens",
                                "min_new_tokens",
                                "stop",
                                "stop_token_ids",
                                "ignore_eos",
                                "skip_special_tokens",
                                "spaces_between_special_tokens",
                                "no_stop_trim",
                                "frequency_penalty",
                                "presence_penalty",
                                "repetition_penalty",
                                "n"};
  for (const auto& [key, value] : p.items()) {
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) == std::end(known))
      throw ApiError(400, fmt::format("unknown sampling parameter '{}'", key), "sampling_params." + key);
  }
  const auto neutral = [&](const char* name, double value) {
    if (p.contains(name) && !p[name].is_null() && !(p[name].is_number() && p[name].get<double>() == value))
      throw ApiError(400, fmt::format("sampling parameter '{}' is supported only as {}", name, value),
                     std::string("sampling_params.") + name);
  };
  neutral("frequency_penalty", 0);
  neutral("presence_penalty", 0);
  neutral("repetition_penalty", 1);
  neutral("min_p", 0);
  neutral("n", 1);
  // All tokens: -1 (older SGLang), 0, or any k past the vocabulary (SGLang's own default is 1 << 30).
  if (p.contains("top_k") && !p["top_k"].is_null() &&
      !(p["top_k"].is_number_integer() &&
        (p["top_k"].get<std::int64_t>() <= 0 || p["top_k"].get<std::int64_t>() >= s.queue->modelConfig().vocab_size)))
    throw ApiError(400,
                   "sampling parameter 'top_k' is supported only for all tokens (-1, 0 or at least the vocabulary)",
                   "sampling_params.top_k");
  SglangSampling out;
  const double t = numberField(p, "temperature", 1.0, 0.0, 100.0);
  out.options.greedy = t == 0.0;
  out.options.temperature = t == 0.0 ? 1.0 : t;
  out.options.top_p = numberField(p, "top_p", 1.0, 1e-6, 1.0);
  out.options.max_new_tokens = static_cast<int>(intField(p, "max_new_tokens", 128, 0, 1 << 20));
  out.options.min_new_tokens = static_cast<int>(intField(p, "min_new_tokens", 0, 0, 1 << 20));
  out.stops = stringsField(p, "stop", 16);
  out.options.stop_token_ids = stopTokenIds(s, p, "sampling_params.");
  out.options.banned_token_ids = bannedIds(s, p, "sampling_params.");
  out.skip_special = boolField(p, "skip_special_tokens", true);
  out.no_stop_trim = boolField(p, "no_stop_trim", false);
  if (!out.stops.empty() && !s.tokenizer)
    throw ApiError(400, "'stop' strings need the model folder's tokenizer.json, which it lacks",
                   "sampling_params.stop");
  return out;
}

std::vector<std::int32_t> promptOf(const ServeState& s, const json* one_ids, const json* one_text) {
  if (one_ids) return tokenIds(*one_ids, "input_ids", s.queue->modelConfig().vocab_size);
  if (!one_text->is_string()) throw ApiError(400, "'text' must be a string or a list of strings", "text");
  if (!s.tokenizer) throw ApiError(400, "'text' needs the model folder's tokenizer.json; give 'input_ids'", "text");
  return s.tokenizer->encode(one_text->get<std::string>(), true);
}

json generateOne(ServeState& s, const std::vector<std::int32_t>& prompt, const SglangSampling& sp, bool logprobs,
                 std::future<QueuedResult>& future, TextStream& stream, double t0) {
  const QueuedResult r = future.get();
  json meta = {{"id", s.newId("gen")}};
  json finish;
  if (r.finish == Finish::Stop) {
    finish = {{"type", "stop"}, {"matched", stream.matched() ? json(stream.matchedStop()) : json(r.tokens.back())}};
  } else if (r.finish == Finish::Length) {
    finish = {{"type", "length"}, {"length", r.tokens.size()}};
  } else {
    finish = {{"type", "abort"}, {"message", r.nonfinite ? "the logits held NaN or inf" : "the request was aborted"}};
  }
  meta["finish_reason"] = finish;
  meta["prompt_tokens"] = prompt.size();
  meta["completion_tokens"] = r.tokens.size();
  meta["cached_tokens"] = 0;
  meta["weight_version"] = r.weight_version;
  if (logprobs) {
    json lp = json::array();
    for (std::size_t i = 0; i < r.tokens.size(); ++i) lp.push_back(json::array({r.logprobs[i], r.tokens[i], nullptr}));
    meta["output_token_logprobs"] = std::move(lp);
  }
  const double t1 = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  meta["e2e_latency"] = t1 - t0;
  std::string text;
  if (s.tokenizer) {
    // A matched stop string is cut from the text unless no_stop_trim; the ids keep every token.
    text = stream.matched() && !sp.no_stop_trim ? stream.text() : decodeIds(*s.tokenizer, r.tokens, sp.skip_special);
  }
  return json{{"text", text}, {"output_ids", r.tokens}, {"meta_info", std::move(meta)}};
}

void generate(ServeState& s, const HttpRequest& req, HttpResponse& res) {
  const json body = parseBody(s, req);
  const double t0 = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (boolField(body, "stream", false))
    throw ApiError(400, "'stream' is not supported on /generate; stream through /v1/completions", "stream");
  const bool has_ids = body.contains("input_ids") && !body["input_ids"].is_null();
  const bool has_text = body.contains("text") && !body["text"].is_null();
  if (has_ids == has_text) throw ApiError(400, "give exactly one of 'input_ids' and 'text'");
  const json& input = has_ids ? body["input_ids"] : body["text"];
  // A batch: a list of id lists, or a list of strings.
  const bool batch = has_ids ? (input.is_array() && !input.empty() && input.front().is_array()) : input.is_array();
  std::vector<const json*> items;
  if (batch) {
    for (const auto& v : input) items.push_back(&v);
  } else {
    items.push_back(&input);
  }
  if (items.empty()) throw ApiError(400, "the batch is empty");
  const json params =
      body.contains("sampling_params") && !body["sampling_params"].is_null() ? body["sampling_params"] : json::object();
  if (params.is_array() && params.size() != items.size())
    throw ApiError(400, "'sampling_params' lists a different number of entries than the batch", "sampling_params");
  const bool logprobs = boolField(body, "return_logprob", false);
  std::vector<SglangSampling> sampling;
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t i = 0; i < items.size(); ++i) {
    sampling.push_back(samplingOf(s, params.is_array() ? params[i] : params));
    prompts.push_back(promptOf(s, has_ids ? items[i] : nullptr, has_ids ? nullptr : items[i]));
    checkPrompt(s, prompts.back(), has_ids ? "input_ids" : "text");
  }
  std::int64_t budget = 0;  // each prompt with its own max_new_tokens
  for (std::size_t i = 0; i < items.size(); ++i)
    budget += static_cast<std::int64_t>(prompts[i].size()) + sampling[i].options.max_new_tokens;
  checkRequestTokens(s, {static_cast<std::size_t>(budget)}, 1, 0);
  std::vector<std::unique_ptr<TextStream>> streams;
  std::vector<std::future<QueuedResult>> futures;
  for (std::size_t i = 0; i < items.size(); ++i) {
    streams.push_back(std::make_unique<TextStream>(s.tokenizer.get(), sampling[i].stops, sampling[i].skip_special));
    QueuedRequest q{prompts[i], sampling[i].options, {}, {}};
    if (!sampling[i].stops.empty()) {
      TextStream* ts = streams.back().get();
      q.on_token = [ts](std::int32_t token, float) { return ts->push(token); };
    }
    futures.push_back(s.queue->submit(std::move(q)));
  }
  json out = json::array();
  for (std::size_t i = 0; i < items.size(); ++i)
    out.push_back(generateOne(s, prompts[i], sampling[i], logprobs, futures[i], *streams[i], t0));
  answerJson(res, batch ? out : out.front());
}

void updateWeights(ServeState& s, const HttpRequest& req, HttpResponse& res) {
  const json body = parseBody(s, req);
  if (!body.contains("model_path") || !body["model_path"].is_string())
    throw ApiError(400, "'model_path' (a folder with safetensors weights) is required", "model_path");
  const std::string path = body["model_path"].get<std::string>();
  if (body.contains("load_format") && !body["load_format"].is_null() && body["load_format"] != "auto" &&
      body["load_format"] != "safetensors")
    throw ApiError(400, "'load_format' is supported as auto or safetensors", "load_format");
  std::string version = s.queue->weightVersion();
  if (body.contains("weight_version") && !body["weight_version"].is_null()) {
    const json& v = body["weight_version"];
    if (v.is_string())
      version = v.get<std::string>();
    else if (v.is_number_integer())
      version = std::to_string(v.get<std::int64_t>());
    else
      throw ApiError(400, "'weight_version' must be a string or an integer", "weight_version");
  }
  const std::string error = s.queue->updateWeights(path, version);
  if (!error.empty()) {
    s.refused.count("weight_update_failed");
    res.status = 400;
    answerJson(res, json{{"success", false},
                         {"message", fmt::format("Failed to update weights: {}", error)},
                         {"num_paused_requests", 0}});
    return;
  }
  answerJson(res, json{{"success", true},
                       {"message", "Succeeded to update model weights."},
                       {"num_paused_requests", 0},
                       {"weight_version", version}});
}

}  // namespace

void addSglangRoutes(ServeState& s) {
  s.http->post("/generate",
               [&s](const HttpRequest& req, HttpResponse& res) { guarded(s, res, [&] { generate(s, req, res); }); });
  s.http->post("/update_weights_from_disk", [&s](const HttpRequest& req, HttpResponse& res) {
    guarded(s, res, [&] { updateWeights(s, req, res); });
  });
  // SGLang 0.5 serves the same body as /model_info too (where newer versions moved it).
  const auto model_info = [&s](const HttpRequest&, HttpResponse& res) {
    const auto& m = s.queue->modelConfig();
    answerJson(res, json{{"model_path", s.options.model.string()},
                         {"tokenizer_path", s.tokenizer ? json(s.options.model.string()) : json(nullptr)},
                         {"is_generation", true},
                         {"weight_version", s.queue->weightVersion()},
                         {"max_context_length", m.max_seq_len},
                         {"vocab_size", m.vocab_size}});
  };
  s.http->get("/get_model_info", model_info);
  s.http->get("/model_info", model_info);
  // Pause and continue, as SGLang's RL flow uses them around a weight update: `mode: abort` ends
  // the running batch's requests as aborted (finish_reason abort); "retract" and "in_place" keep it.
  s.http->post("/pause_generation", [&s](const HttpRequest& req, HttpResponse& res) {
    guarded(s, res, [&] {
      const json body = req.body.empty() ? json::object() : parseBody(s, req);
      const std::string mode =
          body.contains("mode") && body["mode"].is_string() ? body["mode"].get<std::string>() : std::string("abort");
      if (mode != "abort" && mode != "retract" && mode != "in_place")
        throw ApiError(400, fmt::format("'mode' is '{}'; allowed: abort, retract, in_place", mode), "mode");
      s.queue->pause(mode == "abort");
      answerJson(res, json{{"message", "Generation paused successfully."}, {"status", "ok"}});
    });
  });
  s.http->post("/continue_generation", [&s](const HttpRequest&, HttpResponse& res) {
    s.queue->resume();
    answerJson(res, json{{"message", "Generation continued successfully."}, {"status", "ok"}});
  });
  // The limits this server enforces and the requests it refused, by reason (SGLang serves its
  // server arguments here; these are ours).
  s.http->get("/get_server_info", [&s](const HttpRequest&, HttpResponse& res) {
    const ServeLimits& l = s.options.limits;
    json refused = json::object();
    for (const auto& [code, n] : s.refused.snapshot()) refused[code] = n;
    if (const auto n = s.http->bodiesTooLarge(); n > 0) refused["body_too_large"] = n;
    const auto st = s.queue->stats();
    answerJson(res, json{{"model_path", s.options.model.string()},
                         {"max_batch", s.options.max_batch},
                         {"http_threads", s.options.http_threads},
                         {"limits",
                          {{"max_body_bytes", l.max_body_bytes},
                           {"max_json_depth", l.max_json_depth},
                           {"max_request_tokens", l.max_request_tokens},
                           {"read_timeout_s", l.read_timeout_s},
                           {"idle_timeout_s", l.idle_timeout_s}}},
                         {"refused", refused},
                         {"requests", st.requests},
                         {"most_running", st.most_running},
                         {"generated_tokens", st.generated_tokens}});
  });
  s.http->get("/get_weight_version", [&s](const HttpRequest&, HttpResponse& res) {
    answerJson(res, json{{"weight_version", s.queue->weightVersion()}});
  });
  s.http->get("/health", [](const HttpRequest&, HttpResponse& res) {
    res.content_type = "text/plain";
    res.body = "";
  });
  // Generates one token: the engine answers, not just the HTTP thread.
  s.http->get("/health_generate", [&s](const HttpRequest&, HttpResponse& res) {
    SamplingOptions o;
    o.greedy = true;
    o.max_new_tokens = 1;
    const auto r = s.queue->submit(QueuedRequest{{0}, o, {}, {}}).get();
    res.content_type = "text/plain";
    res.status = r.tokens.size() == 1 ? 200 : 503;
  });
}

}  // namespace astraflow::serve_detail
