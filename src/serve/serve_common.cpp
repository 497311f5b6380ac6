// What the SGLang and OpenAI handlers of `astraflow serve` share (serve_state.hpp): error bodies, request limits,
// typed field reads, stop and banned token ids, TextStream's stop-string watch and the EventChannel of a stream.
#include <fmt/format.h>

#include <algorithm>

#include "serve/serve_state.hpp"

namespace astraflow::serve_detail {

std::string ServeState::newId(const char* prefix) {
  std::lock_guard lock(ids_mutex);
  return fmt::format("{}-{}-{}", prefix, created, next_id++);
}

void answerJson(HttpResponse& res, const json& body) {
  res.content_type = "application/json";
  res.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void answerError(HttpResponse& res, const ApiError& e) {
  res.status = e.status;
  const auto nullable = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  answerJson(
      res, json{{"error",
                 {{"message", e.what()}, {"type", e.type}, {"param", nullable(e.param)}, {"code", nullable(e.code)}}}});
}

namespace {

// The deepest nesting of arrays and objects in `text`, strings skipped; stops counting past
// `limit` (one pass, no recursion).
int jsonDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (in_string) {
      if (c == '\\')
        ++k;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
    if (deepest > limit) break;
  }
  return deepest;
}

}  // namespace

void RefusalCounts::count(const std::string& code) {
  std::lock_guard lock(mutex_);
  ++counts_[code];
}

std::map<std::string, std::uint64_t> RefusalCounts::snapshot() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::uint64_t RefusalCounts::total() const {
  std::lock_guard lock(mutex_);
  std::uint64_t n = 0;
  for (const auto& [code, count] : counts_) n += count;
  return n;
}

void checkRequestTokens(const ServeState& s, const std::vector<std::size_t>& prompt_tokens, int n,
                        std::int64_t max_new_tokens) {
  std::int64_t total = 0;
  for (const std::size_t p : prompt_tokens) total += (static_cast<std::int64_t>(p) + max_new_tokens) * n;
  if (total > s.options.limits.max_request_tokens)
    throw ApiError(400,
                   fmt::format("the request asks for {} tokens (prompt tokens plus max tokens, times n, over its "
                               "prompts); this server takes at most {} per request (--max-request-tokens)",
                               total, s.options.limits.max_request_tokens),
                   {}, "request_too_large");
}

json parseBody(const ServeState& s, const HttpRequest& req) {
  const int limit = s.options.limits.max_json_depth;
  if (jsonDepth(req.body, limit) > limit)
    throw ApiError(400, fmt::format("the request body nests deeper than {} levels (--max-json-depth)", limit), {},
                   "json_too_deep");
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

void guarded(ServeState& s, HttpResponse& res, const std::function<void()>& handler) {
  try {
    handler();
  } catch (const ApiError& e) {
    s.refused.count(e.code.empty() ? fmt::format("status_{}", e.status) : e.code);
    answerError(res, e);
  } catch (const std::exception& e) {
    s.refused.count("internal_error");
    answerError(res, ApiError(500, fmt::format("internal error: {}", e.what()), {}, {}, "internal_error"));
  }
}

namespace {

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

double numberField(const json& body, const char* name, double fallback, double low, double high) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw ApiError(400, fmt::format("'{}' must be a number", name), name);
  const double x = v->get<double>();
  if (!(x >= low && x <= high))
    throw ApiError(400, fmt::format("'{}' is {}; allowed: {} to {}", name, x, low, high), name);
  return x;
}

std::int64_t intField(const json& body, const char* name, std::int64_t fallback, std::int64_t low, std::int64_t high) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw ApiError(400, fmt::format("'{}' must be an integer", name), name);
  const auto x = v->get<std::int64_t>();
  if (x < low || x > high) throw ApiError(400, fmt::format("'{}' is {}; allowed: {} to {}", name, x, low, high), name);
  return x;
}

bool boolField(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false", name), name);
  return v->get<bool>();
}

std::vector<std::string> stringsField(const json& body, const char* name, std::size_t max) {
  const json* v = field(body, name);
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) throw ApiError(400, fmt::format("'{}' must be a string or a list of strings", name), name);
      out.push_back(s.get<std::string>());
    }
  } else {
    throw ApiError(400, fmt::format("'{}' must be a string or a list of strings", name), name);
  }
  if (out.size() > max)
    throw ApiError(400, fmt::format("'{}' has {} entries; at most {}", name, out.size(), max), name);
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  return out;
}

std::vector<std::int32_t> tokenIds(const json& value, const char* name, std::int32_t vocab_size) {
  if (!value.is_array()) throw ApiError(400, fmt::format("'{}' must be a list of token ids", name), name);
  std::vector<std::int32_t> ids;
  ids.reserve(value.size());
  for (const auto& v : value) {
    if (!v.is_number_integer()) throw ApiError(400, fmt::format("'{}' must hold integers only", name), name);
    const auto id = v.get<std::int64_t>();
    if (id < 0 || id >= vocab_size)
      throw ApiError(
          400, fmt::format("token id {} in '{}' is outside the vocabulary (0 to {})", id, name, vocab_size - 1), name);
    ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

std::vector<std::int32_t> stopTokenIds(const ServeState& s, const json& fields, const std::string& prefix) {
  std::vector<std::int32_t> ids;
  if (!boolField(fields, "ignore_eos", false)) ids = s.eos_ids;
  if (fields.contains("stop_token_ids") && !fields["stop_token_ids"].is_null()) {
    const std::string name = prefix + "stop_token_ids";
    for (auto id : tokenIds(fields["stop_token_ids"], name.c_str(), s.queue->modelConfig().vocab_size))
      ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<std::int32_t> bannedIds(const ServeState& s, const json& fields, const std::string& prefix) {
  std::vector<std::int32_t> ids;
  const auto it = fields.find("logit_bias");
  if (it == fields.end() || it->is_null()) return ids;
  const std::string name = prefix + "logit_bias";
  if (!it->is_object()) throw ApiError(400, fmt::format("'{}' must be an object of token id → bias", name), name);
  const auto vocab = s.queue->modelConfig().vocab_size;
  for (const auto& [key, bias] : it->items()) {
    std::int64_t id = -1;
    try {
      std::size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size()) id = -1;
    } catch (const std::exception&) {
    }
    if (id < 0 || id >= vocab)
      throw ApiError(
          400, fmt::format("'{}' key '{}' is not a token id of the vocabulary (0 to {})", name, key, vocab - 1), name);
    if (!bias.is_number() || bias.get<double>() > -100)
      throw ApiError(
          400, fmt::format("'{}' supports bans only (a bias of -100 or less); '{}' has {}", name, key, bias.dump()),
          name);
    ids.push_back(static_cast<std::int32_t>(id));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void checkPrompt(const ServeState& s, const std::vector<std::int32_t>& ids, const char* param) {
  if (ids.empty()) throw ApiError(400, "a prompt is empty", param);
  const auto context = s.queue->modelConfig().max_seq_len;
  if (static_cast<std::int64_t>(ids.size()) >= context)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens, leaving no "
                               "room to generate",
                               context, ids.size()),
                   param, "context_length_exceeded");
}

TextStream::TextStream(const HfTokenizer* tokenizer, std::vector<std::string> stops, bool skip_special)
    : tokenizer_(tokenizer), stops_(std::move(stops)), skip_special_(skip_special) {}

bool TextStream::push(std::int32_t token) {
  if (matched_ >= 0) return false;
  tokens_.push_back(token);
  if (!tokenizer_) return true;
  text_ = decodeIds(*tokenizer_, tokens_, skip_special_);
  // A stop string may complete inside this token's text; search only where it could start.
  std::ptrdiff_t best = -1;
  for (const auto& s : stops_) {
    const auto pos = text_.find(s, taken_ > s.size() ? taken_ - s.size() : 0);
    if (pos != std::string::npos && (best < 0 || static_cast<std::ptrdiff_t>(pos) < best)) {
      best = static_cast<std::ptrdiff_t>(pos);
      matched_stop_ = s;
    }
  }
  if (best >= 0) {
    matched_ = best;
    text_.resize(static_cast<std::size_t>(best));
    return false;
  }
  return true;
}

std::string TextStream::text() const { return text_; }

std::string TextStream::take(bool finished) {
  std::size_t safe = text_.size();
  if (!finished && matched_ < 0) {
    // Hold back a tail that is the start of a stop string.
    for (const auto& s : stops_) {
      for (std::size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k) {
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, text_.size() - k);
          break;
        }
      }
    }
    // And an unfinished UTF-8 character: the decoder shows it as U+FFFD (EF BF BD) until its
    // last byte arrives.
    if (safe >= 3 && text_.compare(safe - 3, 3, "\xEF\xBF\xBD") == 0) safe -= 3;
  }
  if (safe <= taken_) return {};
  std::string piece = text_.substr(taken_, safe - taken_);
  taken_ = safe;
  return piece;
}

void EventChannel::push(StreamEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (event.finished) ++finished_;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

std::optional<StreamEvent> EventChannel::next(std::size_t expected_finishes) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !events_.empty() || finished_ >= expected_finishes; });
  if (events_.empty()) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void EventChannel::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool EventChannel::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

std::string decodeIds(const HfTokenizer& tokenizer, std::span<const std::int32_t> ids, bool skip_special) {
  std::vector<std::int32_t> known;
  known.reserve(ids.size());
  for (auto id : ids)
    if (id >= 0 && id < tokenizer.vocabSize()) known.push_back(id);
  return tokenizer.decode(known, skip_special);
}

std::string tokenText(const ServeState& s, std::int32_t id, bool as_token_ids) {
  if (as_token_ids || !s.tokenizer) return fmt::format("token_id:{}", id);
  const std::int32_t one[] = {id};
  return decodeIds(*s.tokenizer, one, false);
}

}  // namespace astraflow::serve_detail
