// The http generation backend (docs/rollout-backends.md): one request per prompt to an external
// server, many in flight, each answer checked before it becomes a Generation.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "astraflow/http/http.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "rollout/backend_responses.hpp"

namespace astraflow {

namespace {

using json = nlohmann::json;
using rollout_detail::Attempt;
using rollout_detail::parseOpenai;
using rollout_detail::parseSglang;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// {"id": -100, ...}: the OpenAI API's ban, which SGLang's logit_bias takes too.
json bans(const std::vector<std::int32_t>& ids) {
  json out = json::object();
  for (auto id : ids) out[std::to_string(id)] = -100;
  return out;
}

std::string sglangBody(const std::vector<std::int32_t>& prompt, const SamplingOptions& o,
                       const std::vector<std::int32_t>& never) {
  json sp = {{"temperature", o.greedy ? 0.0 : o.temperature},
             {"top_p", o.top_p},
             {"max_new_tokens", o.max_new_tokens},
             {"min_new_tokens", o.min_new_tokens},
             {"stop_token_ids", o.stop_token_ids},
             {"skip_special_tokens", false}};
  if (!never.empty()) sp["logit_bias"] = bans(never);
  return json{{"input_ids", prompt}, {"sampling_params", sp}, {"return_logprob", true}}.dump();
}

std::string openaiBody(const std::vector<std::int32_t>& prompt, const SamplingOptions& o, const std::string& model,
                       const std::vector<std::int32_t>& never) {
  json body{{"model", model},
            {"prompt", prompt},
            {"max_tokens", o.max_new_tokens},
            {"min_tokens", o.min_new_tokens},
            {"temperature", o.greedy ? 0.0 : o.temperature},
            {"top_p", o.top_p},
            {"logprobs", 1},
            {"stop_token_ids", o.stop_token_ids},
            {"skip_special_tokens", false},
            {"return_tokens_as_token_ids", true}};
  if (!never.empty()) body["logit_bias"] = bans(never);
  return body.dump();
}

}  // namespace

struct HttpBackend::Impl {
  RolloutBackendSpec spec;
  // One per request in flight, each used by one thread at a time; remade by that thread when
  // the server moved (redirect: a launched server started again on another port).
  std::vector<std::unique_ptr<HttpClient>> clients;
  std::vector<int> client_moves;
  std::mutex mutex;  // guards the stats, the reachability clock and the url
  std::optional<Clock::time_point> failing_since;
  std::string model;                // openai: the model id requests name
  std::vector<std::int32_t> never;  // sorted: ids the policy never generates
  std::string url, control_url;     // requests' server; weight updates' and /v1/models' (client 0)
  int moves = 0, control_moves = 0;

  HttpClient& client(std::size_t k) {
    std::string to;
    {
      std::lock_guard lock(mutex);
      const int now = k == 0 ? control_moves : moves;
      if (clients[k] && client_moves[k] == now) return *clients[k];
      to = k == 0 ? control_url : url;
      client_moves[k] = now;
    }
    clients[k] = std::make_unique<HttpClient>(
        to, std::chrono::seconds(5), std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_seconds * 1000)));
    return *clients[k];
  }
};

HttpBackend::HttpBackend(const RolloutBackendSpec& spec, int rank_in_pool, int max_sequence_length,
                         std::vector<std::int32_t> never_generate)
    : impl_(std::make_unique<Impl>()), max_sequence_length_(max_sequence_length) {
  std::sort(never_generate.begin(), never_generate.end());
  impl_->never = std::move(never_generate);
  impl_->spec = spec;
  // Launched servers (backend.launch) are not known yet: redirect() names each when it answers.
  if (!spec.urls.empty()) impl_->url = spec.urls.at(static_cast<std::size_t>(rank_in_pool) % spec.urls.size());
  impl_->control_url = impl_->url;
  // [0] weight updates and /v1/models, [1 … max_in_flight] requests, the last /health.
  impl_->clients.resize(static_cast<std::size_t>(std::max(1, spec.max_in_flight)) + 2);
  impl_->client_moves.assign(impl_->clients.size(), 0);
  impl_->model = spec.model;
}

HttpBackend::~HttpBackend() = default;

std::string HttpBackend::url() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->url;
}

void HttpBackend::redirect(const std::string& url, bool requests) {
  std::lock_guard lock(impl_->mutex);
  impl_->control_url = url;
  ++impl_->control_moves;
  if (requests && impl_->url != url) {
    impl_->url = url;
    ++impl_->moves;
  }
  impl_->failing_since.reset();
}

double HttpBackend::unreachableSeconds() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->failing_since ? secondsSince(*impl_->failing_since) : 0.0;
}

bool HttpBackend::healthy() {
  const auto r = impl_->client(impl_->clients.size() - 1).get("/health");
  return r.ok();
}

int HttpBackend::maxInFlight() const { return std::max(1, impl_->spec.max_in_flight); }

void HttpBackend::learnModel() {
  auto& im = *impl_;
  if (im.spec.api == HttpApi::Sglang || !im.model.empty()) return;
  // The model id the server serves, asked once.
  const auto r = im.client(0).get("/v1/models");
  try {
    if (r.ok()) im.model = json::parse(r.body).at("data").at(0).at("id").get<std::string>();
  } catch (const std::exception&) {
  }
}

std::vector<Generation> HttpBackend::generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                              const SamplingOptions& options) {
  auto& im = *impl_;
  learnModel();
  std::vector<Generation> out(prompts.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&](std::size_t k) {
    for (std::size_t i = next++; i < prompts.size(); i = next++) out[i] = request(k + 1, prompts[i], options);
  };
  const std::size_t width = std::min<std::size_t>(prompts.size(), static_cast<std::size_t>(im.spec.max_in_flight));
  std::vector<std::thread> threads;
  for (std::size_t k = 1; k < width; ++k) threads.emplace_back(worker, k);
  worker(0);
  for (auto& t : threads) t.join();
  return out;
}

// A row's request. After an abort that made tokens (the server paused with mode abort around a
// weight update), the tokens are kept with their log-probs and version and the request goes on
// from them: the prompt plus those tokens, the limits less what was made. Such a resume is
// progress, not a failure: it does not use up a retry.
Generation HttpBackend::request(std::size_t client, const std::vector<std::int32_t>& prompt,
                                const SamplingOptions& options) {
  auto& im = *impl_;
  // As the engine: a prompt that fills the context gets nothing (the episode ends truncated), and
  // no request asks for more than the context holds — a server refuses those (HTTP 400), which
  // would fail the episode and have its task re-issued, refused again, for ever.
  const int room = max_sequence_length_ - static_cast<int>(prompt.size());
  if (room <= 0) return Generation{};
  std::vector<std::int32_t> context = prompt;
  SamplingOptions o = options;
  o.max_new_tokens = std::min(o.max_new_tokens, room);
  o.min_new_tokens = std::min(o.min_new_tokens, o.max_new_tokens);
  Generation made;  // tokens of aborted tries
  auto keep = [&made](const Generation& g) {
    made.tokens.insert(made.tokens.end(), g.tokens.begin(), g.tokens.end());
    made.logprobs.insert(made.logprobs.end(), g.logprobs.begin(), g.logprobs.end());
    made.token_versions.insert(made.token_versions.end(), g.tokens.size(), g.weight_version);
    made.weight_version = g.weight_version;
  };
  // A server silent for longer than lost_after_seconds gets one try per request, no retries,
  // until it answers again: a dead server costs each batch one refused connect, not the backoff.
  int retries = im.spec.retries;
  {
    std::lock_guard lock(im.mutex);
    if (im.failing_since && secondsSince(*im.failing_since) > im.spec.lost_after_seconds) retries = 0;
  }
  for (int tries = 0; tries <= retries; ++tries) {
    if (tries > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(im.spec.backoff_seconds * (1 << (tries - 1))));
    }
    const std::string body =
        im.spec.api == HttpApi::Sglang ? sglangBody(context, o, im.never) : openaiBody(context, o, im.model, im.never);
    Attempt last = attempt(client, body, tries);
    if (last.generation || last.partial) {
      std::lock_guard lock(im.mutex);
      stats_.prompt_tokens += context.size();
      if (last.cached_tokens >= 0) {
        stats_.cached_prompt_tokens += static_cast<std::uint64_t>(last.cached_tokens);
        ++stats_.cache_reports;
      }
    }
    if (last.generation) {
      keep(*last.generation);
      made.stopped = last.generation->stopped;
      return made;
    }
    if (last.partial) {
      const auto n = static_cast<int>(last.partial->tokens.size());
      keep(*last.partial);
      context.insert(context.end(), last.partial->tokens.begin(), last.partial->tokens.end());
      o.max_new_tokens -= n;
      o.min_new_tokens = std::max(0, o.min_new_tokens - n);
      {
        std::lock_guard lock(im.mutex);
        ++stats_.resumed;
        stats_.resumed_tokens += static_cast<std::uint64_t>(n);
      }
      if (o.max_new_tokens <= 0) return made;  // the abort came at its last token: done, unstopped
      tries = -1;                              // progress: the retries start again, with no wait
      continue;
    }
    if (!last.retryable) break;
  }
  Generation failed;
  failed.failed = true;
  std::lock_guard lock(im.mutex);
  ++stats_.failed;
  return failed;
}

Attempt HttpBackend::attempt(std::size_t client, const std::string& body, int index) {
  auto& im = *impl_;
  const char* path = im.spec.api == HttpApi::Sglang ? "/generate" : "/v1/completions";
  const auto t0 = Clock::now();
  const HttpResult r = im.client(client).postJson(path, body);
  Attempt last;
  if (!r.transportOk()) {
    last = Attempt{std::nullopt, std::nullopt, r.error, true, Attempt::Kind::Transport};
  } else if (!r.ok()) {
    // 4xx says the request itself is wrong: sending it again cannot help (but 408/429).
    const bool retryable = r.status >= 500 || r.status == 408 || r.status == 429;
    last = Attempt{std::nullopt, std::nullopt, fmt::format("HTTP {}: {}", r.status, r.body.substr(0, 300)), retryable,
                   Attempt::Kind::Http};
  } else {
    last = im.spec.api == HttpApi::Sglang ? parseSglang(r.body) : parseOpenai(r.body);
    // A token the policy never generates would have log-prob -inf under the trainer.
    for (const auto* g : {last.generation ? &*last.generation : nullptr, last.partial ? &*last.partial : nullptr}) {
      if (g == nullptr) continue;
      for (auto t : g->tokens) {
        if (std::binary_search(im.never.begin(), im.never.end(), t)) {
          last = Attempt{std::nullopt, std::nullopt,
                         fmt::format("the answer holds token {}, which the policy never generates", t), true,
                         Attempt::Kind::Malformed};
          break;
        }
      }
    }
  }
  std::lock_guard lock(im.mutex);
  stats_.request_seconds += secondsSince(t0);
  if (index > 0) ++stats_.retries;
  if (last.kind == Attempt::Kind::Transport) {
    ++stats_.transport_errors;
    if (!im.failing_since) im.failing_since = t0;
  } else {
    im.failing_since.reset();  // it answered: reachable
    if (last.kind == Attempt::Kind::Http && !last.partial) ++stats_.http_errors;
    if (last.kind == Attempt::Kind::Malformed) ++stats_.malformed;
  }
  if (last.generation) {
    ++stats_.requests;
  } else if (!last.partial && stats_.transport_errors + stats_.http_errors + stats_.malformed <= 5) {
    spdlog::warn("http backend {}: request failed (try {}): {}", im.url, index + 1, last.error);
  }
  return last;
}

// The calls around a version: a pause (abort mode; vLLM always, since it swaps weights between
// engine steps under the requests in flight: `wait` lets them finish on the old weights), the load,
// vLLM's prefix-cache reset (cached keys and values are the old weights') and version label, the
// resume. A pause or resume the server refuses is a warning; a refused load or reset fails the update.
bool HttpBackend::loadWeights(const std::string& folder, std::int64_t version) {
  auto& im = *impl_;
  const auto t0 = Clock::now();
  const bool vllm = im.spec.api == HttpApi::Vllm;
  const bool abort = im.spec.update_mode == HttpUpdateMode::Abort;
  const bool pause = abort || vllm;
  if (pause) {
    if (vllm)
      control(abort ? "/pause?mode=abort" : "/pause?mode=wait", "{}", false);
    else
      control("/pause_generation", R"({"mode": "abort"})", false);
  }
  const std::string body = vllm ? json{{"method", "reload_weights"}, {"kwargs", {{"weights_path", folder}}}}.dump()
                                : json{{"model_path", folder}, {"weight_version", std::to_string(version)}}.dump();
  bool loaded = loadWeightsOnce(vllm ? "/collective_rpc" : im.spec.update_path, body, version, t0);
  if (loaded && vllm) {
    loaded = control("/reset_prefix_cache", "", true) &&
             control("/update_weight_version", json{{"new_version", std::to_string(version)}}.dump(), true);
  }
  if (pause) control(vllm ? "/resume" : "/continue_generation", "{}", false);
  std::lock_guard lock(im.mutex);
  if (loaded) {
    ++stats_.weight_updates;
    stats_.weight_load_seconds += secondsSince(t0);
    refused_in_row_ = 0;
  } else {
    ++stats_.weight_update_failures;
  }
  return loaded;
}

// One control call of an update; when `counts`, a refusal is the update's (its answer kept).
bool HttpBackend::control(const std::string& path, const std::string& body, bool counts) {
  auto& im = *impl_;
  const HttpResult r = im.client(0).postJson(path, body);
  if (r.ok()) return true;
  const std::string what = r.transportOk() ? fmt::format("HTTP {} {}", r.status, r.body.substr(0, 300)) : r.error;
  spdlog::warn("http backend {}: POST {}: {}", url(), path, what);
  if (counts) refused(path, r);
  return false;
}

// The server answered an update call with a refusal: counted toward backend.update_failures.
void HttpBackend::refused(const std::string& path, const HttpResult& r) {
  std::lock_guard lock(impl_->mutex);
  if (!r.transportOk()) return;  // unreachable: lost_after_seconds decides
  ++refused_in_row_;
  last_refusal_ = fmt::format("POST {}{} answered HTTP {}: {}", impl_->url, path, r.status, r.body.substr(0, 300));
}

int HttpBackend::updatesRefusedInRow() const {
  std::lock_guard lock(impl_->mutex);
  return refused_in_row_;
}

std::string HttpBackend::lastRefusal() const {
  std::lock_guard lock(impl_->mutex);
  return last_refusal_;
}

bool HttpBackend::loadWeightsOnce(const std::string& path, const std::string& body, std::int64_t version,
                                  std::chrono::steady_clock::time_point t0) {
  auto& im = *impl_;
  for (int attempt = 0; attempt <= im.spec.retries; ++attempt) {
    if (attempt > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(im.spec.backoff_seconds * (1 << (attempt - 1))));
    const HttpResult r = im.client(0).postJson(path, body);
    if (!r.transportOk()) {
      std::lock_guard lock(im.mutex);
      ++stats_.transport_errors;
      if (!im.failing_since) im.failing_since = t0;
      continue;
    }
    bool success = r.ok();
    if (success) {
      try {
        const json j = json::parse(r.body);
        success = !j.contains("success") || j["success"] == true;
      } catch (const std::exception&) {
        success = false;
      }
    }
    {
      std::lock_guard lock(im.mutex);
      im.failing_since.reset();
      if (success) return true;
      ++stats_.http_errors;
    }
    spdlog::warn("http backend {}: weight update to version {} refused: HTTP {} {}", url(), version, r.status,
                 r.body.substr(0, 300));
    if (r.status < 500 || attempt == im.spec.retries) {
      refused(path, r);
      break;  // the server read the request and said no
    }
  }
  return false;
}

}  // namespace astraflow
