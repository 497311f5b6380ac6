// parseSglang and parseOpenai: an inference server's /generate or /v1/completions body read into a Generation, or an
// Attempt saying why it was refused and whether a retry could help; an aborted request's tokens kept to resume from.
#include "rollout/backend_responses.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace astraflow::rollout_detail {

namespace {

using json = nlohmann::json;

std::int64_t versionOf(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    try {
      std::size_t used = 0;
      const auto x = std::stoll(v.get<std::string>(), &used);
      if (used == v.get<std::string>().size()) return x;
    } catch (const std::exception&) {
    }
  }
  return -1;
}

// Checks the parsed ids and log-probs: as many of each, all finite (a -inf or NaN behaviour
// log-prob would poison the importance ratios downstream).
std::string checkTokens(const Generation& g) {
  if (g.tokens.size() != g.logprobs.size())
    return fmt::format("{} tokens but {} log-probs", g.tokens.size(), g.logprobs.size());
  for (float lp : g.logprobs)
    if (!std::isfinite(lp) || lp > 1e-3f) return fmt::format("log-prob {} is not a finite log-probability", lp);
  return {};
}

// The generation, once its ids and log-probs pair up as finite log-probabilities.
Attempt accepted(Attempt a, Generation g) {
  if (auto why = checkTokens(g); !why.empty()) {
    a.error = why;
    return a;
  }
  a.generation = std::move(g);
  a.kind = Attempt::Kind::None;
  return a;
}

}  // namespace

namespace {

// meta_info.output_token_logprobs as ids and log-probs; the reason when they are not that.
std::string readTokenLogprobs(const json& meta, Generation& g) {
  const json& lps = meta.at("output_token_logprobs");
  if (!lps.is_array()) return "meta_info.output_token_logprobs is not a list";
  for (const auto& e : lps) {
    if (!e.is_array() || e.size() < 2)
      return fmt::format("output_token_logprobs entry {} is not [logprob, id, text]", e.dump());
    g.logprobs.push_back(e.at(0).is_number() ? e.at(0).get<float>() : NAN);
    g.tokens.push_back(e.at(1).get<std::int32_t>());
  }
  return {};
}

}  // namespace

Attempt parseSglang(const std::string& body) {
  Attempt a;
  a.kind = Attempt::Kind::Malformed;
  try {
    const json j = json::parse(body);
    const json& meta = j.at("meta_info");
    const json& finish = meta.at("finish_reason");
    const std::string type = finish.is_object() ? finish.at("type").get<std::string>() : std::string("abort");
    Generation g;
    if (meta.contains("weight_version")) g.weight_version = versionOf(meta["weight_version"]);
    if (meta.contains("cached_tokens") && meta["cached_tokens"].is_number_integer())
      a.cached_tokens = std::max<std::int64_t>(0, meta["cached_tokens"].get<std::int64_t>());
    if (type == "abort") {
      a.error = "the server aborted the request";
      a.kind = Attempt::Kind::Http;
      // What it made before the abort, when it is well formed: kept, to resume from.
      if (meta.contains("output_token_logprobs") && readTokenLogprobs(meta, g).empty() && checkTokens(g).empty() &&
          !g.tokens.empty()) {
        a.partial = std::move(g);
      }
      return a;
    }
    if (auto why = readTokenLogprobs(meta, g); !why.empty()) {
      a.error = why;
      return a;
    }
    if (j.contains("output_ids") && j["output_ids"].get<std::vector<std::int32_t>>() != g.tokens) {
      a.error = "output_ids differ from the ids of output_token_logprobs";
      return a;
    }
    g.stopped = type == "stop";
    return accepted(std::move(a), std::move(g));
  } catch (const std::exception& e) {
    a.error = fmt::format("not a /generate response: {}", e.what());
  }
  return a;
}

Attempt parseOpenai(const std::string& body) {
  Attempt a;
  a.kind = Attempt::Kind::Malformed;
  try {
    const json j = json::parse(body);
    const json& choice = j.at("choices").at(0);
    const json& lp = choice.at("logprobs");
    if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
      const auto details = u->find("prompt_tokens_details");
      if (details != u->end() && details->is_object() && details->contains("cached_tokens") &&
          (*details)["cached_tokens"].is_number_integer())
        a.cached_tokens = std::max<std::int64_t>(0, (*details)["cached_tokens"].get<std::int64_t>());
    }
    Generation g;
    if (!lp.at("tokens").is_array() || !lp.at("token_logprobs").is_array()) {
      a.error = "logprobs.tokens and logprobs.token_logprobs must be lists";
      return a;
    }
    for (const auto& t : lp.at("tokens")) {
      const std::string s = t.get<std::string>();
      if (s.rfind("token_id:", 0) != 0) {
        a.error = fmt::format("token '{}' is not rendered as token_id:N (return_tokens_as_token_ids)", s);
        return a;
      }
      g.tokens.push_back(static_cast<std::int32_t>(std::stol(s.substr(9))));
    }
    for (const auto& v : lp.at("token_logprobs")) g.logprobs.push_back(v.is_number() ? v.get<float>() : NAN);
    const json& finish = choice.at("finish_reason");
    if (finish == "abort") {
      // vLLM's answer to a request a pause with mode abort ended: what it made is kept to resume from.
      a.error = "the server aborted the request";
      a.kind = Attempt::Kind::Http;
      if (checkTokens(g).empty() && !g.tokens.empty()) a.partial = std::move(g);
      return a;
    }
    if (!finish.is_string() || (finish != "stop" && finish != "length")) {
      a.error = fmt::format("finish_reason {}", finish.dump());
      a.kind = Attempt::Kind::Http;
      return a;
    }
    g.stopped = finish == "stop";
    return accepted(std::move(a), std::move(g));
  } catch (const std::exception& e) {
    a.error = fmt::format("not a /v1/completions response: {}", e.what());
  }
  return a;
}

}  // namespace astraflow::rollout_detail
