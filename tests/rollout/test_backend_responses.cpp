// The http backend's reading of server answers (src/rollout/backend_responses.hpp) on the servers'
// published examples (tests/fixtures/rollout_backends) and on mutations of them: every valid body
// gives its ids and log-probs, every broken one a reason, never an exception.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rollout/backend_responses.hpp"

namespace astraflow::rollout_detail {
namespace {

using json = nlohmann::json;

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("ASTRAFLOW_BACKEND_FIXTURES");
  EXPECT_NE(dir, nullptr) << "ASTRAFLOW_BACKEND_FIXTURES is not set";
  std::ifstream in(std::string(dir ? dir : ".") + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

TEST(BackendResponses, SglangLogprobsExample) {
  const Attempt a = parseSglang(fixture("sglang_generate_logprobs.json"));
  ASSERT_TRUE(a.generation) << a.error;
  EXPECT_EQ(a.generation->tokens, (std::vector<std::int32_t>{12095, 13, 1084, 374, 7407, 304}));
  ASSERT_EQ(a.generation->logprobs.size(), 6u);
  EXPECT_FLOAT_EQ(a.generation->logprobs[0], -0.73046875f);
  EXPECT_FLOAT_EQ(a.generation->logprobs[5], -0.060546875f);
  EXPECT_FALSE(a.generation->stopped);          // finish_reason length
  EXPECT_EQ(a.generation->weight_version, -1);  // this server reports none
}

TEST(BackendResponses, SglangStopWithVersion) {
  const Attempt a = parseSglang(fixture("sglang_generate_stop.json"));
  ASSERT_TRUE(a.generation) << a.error;
  EXPECT_EQ(a.generation->tokens, (std::vector<std::int32_t>{12095, 13, 151645}));
  EXPECT_TRUE(a.generation->stopped);
  EXPECT_EQ(a.generation->weight_version, 42);
}

TEST(BackendResponses, SglangAbortIsRetryableNotAGeneration) {
  const Attempt a = parseSglang(fixture("sglang_generate_abort.json"));
  EXPECT_FALSE(a.generation);
  EXPECT_EQ(a.kind, Attempt::Kind::Http);
  EXPECT_TRUE(a.retryable);
  // The token made before the abort, kept to resume from.
  ASSERT_TRUE(a.partial);
  EXPECT_EQ(a.partial->tokens, (std::vector<std::int32_t>{12095}));
  EXPECT_FLOAT_EQ(a.partial->logprobs[0], -0.73f);
  EXPECT_EQ(a.partial->weight_version, 42);
  // Log-probs that are not log-probabilities leave nothing to resume from.
  auto body = nlohmann::json::parse(fixture("sglang_generate_abort.json"));
  body["meta_info"]["output_token_logprobs"][0][0] = 0.5;
  EXPECT_FALSE(parseSglang(body.dump()).partial);
}

TEST(BackendResponses, OpenAiTokenIds) {
  const Attempt a = parseOpenai(fixture("vllm_completion_token_ids.json"));
  ASSERT_TRUE(a.generation) << a.error;
  EXPECT_EQ(a.generation->tokens, (std::vector<std::int32_t>{264, 12366}));
  EXPECT_FLOAT_EQ(a.generation->logprobs[1], -0.25f);
  EXPECT_TRUE(a.generation->stopped);
}

TEST(BackendResponses, OpenAiAbortKeepsTheTokensMade) {
  // vLLM ends a request a pause with mode abort caught with finish_reason "abort": its tokens are
  // kept to resume from, never taken as a finished generation.
  json body = json::parse(fixture("vllm_completion_token_ids.json"));
  body["choices"][0]["finish_reason"] = "abort";
  const Attempt a = parseOpenai(body.dump());
  EXPECT_FALSE(a.generation);
  ASSERT_TRUE(a.partial) << a.error;
  EXPECT_EQ(a.partial->tokens, (std::vector<std::int32_t>{264, 12366}));
  EXPECT_TRUE(a.retryable);
  body["choices"][0]["logprobs"]["token_logprobs"][1] = nullptr;  // a broken partial is not kept
  EXPECT_FALSE(parseOpenai(body.dump()).partial);
}

// Prefix-cache hits where the server says: SGLang's meta_info.cached_tokens (in its published
// example, 0), vLLM's usage.prompt_tokens_details.cached_tokens (null unless the server runs with
// --enable-prompt-tokens-details: not said, -1).
TEST(BackendResponses, CachedPromptTokensWhereTheServerSays) {
  EXPECT_EQ(parseSglang(fixture("sglang_generate_stop.json")).cached_tokens, 0);
  json sglang = json::parse(fixture("sglang_generate_stop.json"));
  sglang["meta_info"]["cached_tokens"] = 7;
  EXPECT_EQ(parseSglang(sglang.dump()).cached_tokens, 7);
  sglang["meta_info"].erase("cached_tokens");
  EXPECT_EQ(parseSglang(sglang.dump()).cached_tokens, -1);
  EXPECT_EQ(parseOpenai(fixture("vllm_completion_token_ids.json")).cached_tokens, -1);
  json vllm = json::parse(fixture("vllm_completion_token_ids.json"));
  vllm["usage"]["prompt_tokens_details"] = {{"cached_tokens", 4}};
  const Attempt a = parseOpenai(vllm.dump());
  ASSERT_TRUE(a.generation);
  EXPECT_EQ(a.cached_tokens, 4);
  vllm["usage"]["prompt_tokens_details"] = {{"cached_tokens", "four"}};  // not a count: not said
  EXPECT_EQ(parseOpenai(vllm.dump()).cached_tokens, -1);
}

TEST(BackendResponses, OpenAiTextTokensAreRefused) {
  // Without return_tokens_as_token_ids the ids cannot be known for sure: refused, with the reason.
  const Attempt a = parseOpenai(fixture("vllm_completion_text_tokens.json"));
  EXPECT_FALSE(a.generation);
  EXPECT_EQ(a.kind, Attempt::Kind::Malformed);
  EXPECT_NE(a.error.find("token_id"), std::string::npos) << a.error;
}

// A body cut anywhere, or with its log-probs broken, is refused, never thrown on.
TEST(BackendResponses, MutationsAreRefused) {
  for (const char* name : {"sglang_generate_logprobs.json", "sglang_generate_stop.json"}) {
    const std::string body = fixture(name);
    for (std::size_t cut = 0; cut + 1 < body.size(); cut += 7) {
      const Attempt a = parseSglang(body.substr(0, cut));
      EXPECT_FALSE(a.generation) << name << " cut at " << cut;
      EXPECT_FALSE(a.error.empty());
    }
    const json good = json::parse(body);
    auto mutated = [&](auto edit) {
      json j = good;
      edit(j["meta_info"]["output_token_logprobs"]);
      return parseSglang(j.dump());
    };
    EXPECT_FALSE(mutated([](json& lp) { lp[0][0] = nullptr; }).generation) << "a null log-prob";
    EXPECT_FALSE(mutated([](json& lp) { lp[0][0] = 0.5; }).generation) << "a positive log-prob";
    EXPECT_FALSE(mutated([](json& lp) { lp[1][1] = "13"; }).generation) << "an id that is a string";
    EXPECT_FALSE(mutated([](json& lp) { lp = json::object(); }).generation) << "not a list";
  }
  // output_ids that disagree with the log-prob ids.
  json j = json::parse(fixture("sglang_generate_stop.json"));
  j["output_ids"].erase(j["output_ids"].size() - 1);
  EXPECT_FALSE(parseSglang(j.dump()).generation);

  const std::string body = fixture("vllm_completion_token_ids.json");
  for (std::size_t cut = 0; cut + 1 < body.size(); cut += 7) EXPECT_FALSE(parseOpenai(body.substr(0, cut)).generation);
  json o = json::parse(body);
  o["choices"][0]["logprobs"]["token_logprobs"].erase(1);
  const Attempt shorter = parseOpenai(o.dump());
  EXPECT_FALSE(shorter.generation);
  EXPECT_NE(shorter.error.find("2 tokens but 1 log-probs"), std::string::npos) << shorter.error;
  o = json::parse(body);
  o["choices"][0]["finish_reason"] = "abort";
  EXPECT_FALSE(parseOpenai(o.dump()).generation);
}

// What long chain-of-thought rollouts send back: 32,768 generated tokens with a 200,000-character
// text (NULs included), read whole; a body nested 5,000 deep, a 200k string that is not valid
// UTF-8 and a body of 200k brackets are refused with a reason, never thrown on.
TEST(BackendResponses, ProductionSizedAndHostileBodies) {
  json big;
  big["text"] = std::string(200'000, 'x') + std::string("\0tail", 5);
  json lps = json::array();
  for (int i = 0; i < 32'768; ++i) lps.push_back(json::array({-0.5, i % 1000, nullptr}));
  big["meta_info"] = {{"finish_reason", {{"type", "length"}}}, {"output_token_logprobs", lps}};
  const Attempt a = parseSglang(big.dump());
  ASSERT_TRUE(a.generation) << a.error;
  EXPECT_EQ(a.generation->tokens.size(), 32'768u);
  EXPECT_EQ(a.generation->tokens.back(), 32'767 % 1000);
  const std::string deep = std::string(5'000, '[') + std::string(5'000, ']');
  const std::string broken = "{\"text\": \"" + std::string(200'000, '\xff') + "\"}";
  const std::string brackets(200'000, '{');
  for (const std::string* body : {&deep, &broken, &brackets}) {
    for (const auto& parse : {parseSglang, parseOpenai}) {
      const Attempt r = parse(*body);
      EXPECT_FALSE(r.generation);
      EXPECT_FALSE(r.error.empty());
    }
  }
}

}  // namespace
}  // namespace astraflow::rollout_detail
