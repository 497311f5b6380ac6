#pragma once
// What the API handlers of `astraflow serve` share, and the pieces both APIs use: error bodies
// in the OpenAI shape, typed reading of request fields, the stop-string watcher and the channel
// a streamed response is fed through. Private to src/serve.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "astraflow/http/http.hpp"
#include "astraflow/serve/inference_server.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "serve/generation_queue.hpp"

namespace astraflow::serve_detail {

using json = nlohmann::ordered_json;

// Requests answered 4xx/5xx, by the error code of their answer ("context_length_exceeded",
// "json_too_deep", … ; "status_<n>" for an answer without a code): GET /get_server_info.
class RefusalCounts {
 public:
  void count(const std::string& code);
  std::map<std::string, std::uint64_t> snapshot() const;
  std::uint64_t total() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> counts_;
};

struct ServeState {
  ServeOptions options;
  std::string served_name;
  std::unique_ptr<HfTokenizer> tokenizer;     // null when the folder has no tokenizer.json
  std::optional<ChatTemplate> chat_template;  // absent when the folder has none
  std::vector<std::int32_t> eos_ids;          // generation ends on these unless ignore_eos
  std::int64_t created = 0;                   // unix seconds the server started
  std::unique_ptr<GenerationQueue> queue;
  std::unique_ptr<HttpServer> http;
  int port = 0;
  std::mutex ids_mutex;
  std::uint64_t next_id = 0;
  RefusalCounts refused;
  std::string newId(const char* prefix);  // "cmpl-<n>-<created>"
};

// A request the API refuses: status, message and the OpenAI error fields.
struct ApiError : std::runtime_error {
  ApiError(int http_status, const std::string& message, std::string param_name = {}, std::string error_code = {},
           std::string error_type = "invalid_request_error")
      : std::runtime_error(message),
        status(http_status),
        param(std::move(param_name)),
        code(std::move(error_code)),
        type(std::move(error_type)) {}
  int status;
  std::string param, code, type;
};

// {"error": {"message", "type", "param", "code"}} with the status.
void answerError(HttpResponse& res, const ApiError& e);
void answerJson(HttpResponse& res, const json& body);
// The body as a JSON object, or ApiError 400 (not JSON, not an object, nested deeper than
// max_json_depth: checked in one pass before parsing, so no depth reaches the parser).
json parseBody(const ServeState& s, const HttpRequest& req);
// Runs `handler`, turning ApiError and other exceptions into error answers, counted in s.refused.
void guarded(ServeState& s, HttpResponse& res, const std::function<void()>& handler);
// A request's prompts (token counts) with n choices of up to max_new_tokens each must fit
// limits.max_request_tokens; ApiError 400 request_too_large otherwise.
void checkRequestTokens(const ServeState& s, const std::vector<std::size_t>& prompt_tokens, int n,
                        std::int64_t max_new_tokens);

// Typed optional fields: absent or null → fallback; present with the wrong type or outside
// [low, high] → ApiError 400 naming the field.
double numberField(const json& body, const char* name, double fallback, double low, double high);
std::int64_t intField(const json& body, const char* name, std::int64_t fallback, std::int64_t low, std::int64_t high);
bool boolField(const json& body, const char* name, bool fallback);
// A string or a list of strings (OpenAI `stop`); at most `max` of them.
std::vector<std::string> stringsField(const json& body, const char* name, std::size_t max);
// A list of token ids inside the vocabulary.
std::vector<std::int32_t> tokenIds(const json& value, const char* name, std::int32_t vocab_size);

// The ids a request ends on: the model's end-of-sequence ids unless `ignore_eos`, and the ids of
// `stop_token_ids` (SGLang's sampling parameter, vLLM's extension), sorted and unique; `prefix`
// names the fields in errors ("sampling_params." or "").
std::vector<std::int32_t> stopTokenIds(const ServeState& s, const json& fields, const std::string& prefix);

// The ids a request bans: `logit_bias` entries ({"id": bias}) of -100 or less, which the OpenAI API
// documents as a ban (the ids are never drawn); any other bias is refused (400): the engine does
// not shift logits. Sorted and unique.
std::vector<std::int32_t> bannedIds(const ServeState& s, const json& fields, const std::string& prefix);

// A prompt must be non-empty and leave room for a token in the model's context (400 otherwise,
// code context_length_exceeded, as the OpenAI API answers).
void checkPrompt(const ServeState& s, const std::vector<std::int32_t>& ids, const char* param);

// Watches a request's generated tokens for stop strings and yields the text that is safe to
// stream: everything up to a matched stop string (which is left out, as the OpenAI API does),
// holding back a tail that could still become one, and an unfinished UTF-8 character.
class TextStream {
 public:
  TextStream(const HfTokenizer* tokenizer, std::vector<std::string> stops, bool skip_special);
  // After each token: false when a stop string has matched (the request should end).
  bool push(std::int32_t token);
  // The text not yet taken that is final now (everything when `finished`).
  std::string take(bool finished);
  std::string text() const;  // the whole text so far, cut at a matched stop string
  bool matched() const { return matched_ >= 0; }
  const std::string& matchedStop() const { return matched_stop_; }

 private:
  const HfTokenizer* tokenizer_;
  std::vector<std::string> stops_;
  bool skip_special_;
  std::vector<std::int32_t> tokens_;
  std::string text_;
  std::ptrdiff_t matched_ = -1;  // where the stop string starts in text_
  std::string matched_stop_;
  std::size_t taken_ = 0;
};

// Events of a streamed response, from the generation thread to the connection's thread.
struct StreamEvent {
  std::size_t choice = 0;
  std::string text;                  // new text of the choice
  std::vector<std::int32_t> tokens;  // tokens that came with it
  std::vector<float> logprobs;
  bool finished = false;
  std::string finish_reason;  // with `finished`
};

class EventChannel {
 public:
  void push(StreamEvent event);
  // Waits for the next event; nullopt once `expected_finishes` choices have finished and
  // everything was taken.
  std::optional<StreamEvent> next(std::size_t expected_finishes);
  void cancel();  // the client went away: producers should stop
  bool cancelled() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::size_t finished_ = 0;
  bool cancelled_ = false;
};

// The tokenizer's decoding of `ids`, leaving out ids past its vocabulary (a model's embedding
// table is often padded beyond it: transformers' decode skips them the same way).
std::string decodeIds(const HfTokenizer& tokenizer, std::span<const std::int32_t> ids, bool skip_special);

// The text of one token as the OpenAI logprobs fields show it (or "token_id:<id>").
std::string tokenText(const ServeState& s, std::int32_t id, bool as_token_ids);

// The routes of each API.
void addSglangRoutes(ServeState& s);
void addOpenAiRoutes(ServeState& s);

}  // namespace astraflow::serve_detail
