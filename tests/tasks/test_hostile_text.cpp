// Every path that reads model text, fed what long chain-of-thought RL produces and worse:
// 200,000-character answers, 5,000 nested \boxed{} (closed and unclosed), invalid UTF-8 and
// NUL bytes. Each gives an answer or a clear per-item error — none may crash or hang the rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/code_reward.hpp"
#include "astraflow/tasks/reward.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "astraflow/tasks/tool_call.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

constexpr std::size_t kLong = 200'000;
constexpr int kDeep = 5'000;

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t k = 0; k < n; ++k) out.append(s);
  return out;
}

RewardSpec specOf(const std::string& kind, const std::string& pattern = "") {
  RewardSpec s;
  s.kind = enumByName(kRewardKindNames, kind).value();
  s.pattern = pattern;
  return s;
}

RewardInput input(std::string_view response, std::string_view reference = {}, std::string_view tests = {}) {
  RewardInput in;
  in.response = response;
  in.reference = reference;
  in.tests_json = tests;
  return in;
}

std::string deepBoxes(std::string_view inner) {
  return repeat("\\boxed{", kDeep) + std::string(inner) + repeat("}", kDeep);
}

const std::string kInvalidUtf8 = "\xff\xfe\xc3(\xe2\x82\xed\xa0\x80 \xf4\x90\x80\x80";
const std::string kNuls("a\0b\0\0c", 6);

// Each response with what the math reward must say of it against "42".
struct Hostile {
  std::string name, response;
  RewardReason math;
};

std::vector<Hostile> hostileResponses() {
  return {
      {"long prose then the answer", repeat("so we carry the two ", kLong / 20) + "\nThe answer is: 42",
       RewardReason::Correct},
      {"the answer then 200k on its line", "The answer is: " + repeat("x", kLong), RewardReason::Wrong},
      {"5,000 nested boxes", deepBoxes("42"), RewardReason::Correct},
      // No box closes: the last expression is the answer.
      {"5,000 unclosed boxes", repeat("\\boxed{", kDeep) + "42", RewardReason::Correct},
      {"200k unclosed wrappers in a box", "\\boxed{" + repeat("\\text{", kLong / 6) + "42}", RewardReason::Correct},
      // Arithmetic that would not end or not fit is refused, not computed.
      {"a power tower", "\\boxed{9^{9^{9^{9}}}}", RewardReason::Wrong},
      {"a polynomial to the 4096th power", "\\boxed{((x+1)^{64})^{64}}", RewardReason::Wrong},
      {"a large factorial", "\\boxed{100000!}", RewardReason::Wrong},
      {"9,000 digits", "\\boxed{" + repeat("9", 9'000) + "}", RewardReason::Wrong},
      {"x^(10^10)", "\\boxed{(x^{100000})^{100000}}", RewardReason::Wrong},
      {"a sum of five to the 64th", "\\boxed{(a+b+c+d+f)^{64}}", RewardReason::Wrong},
      {"500 factorials of 10,000", "\\boxed{" + repeat("10000!", 500) + "}", RewardReason::Wrong},
      {"25,000 unclosed display maths", repeat("\\[ $42$ ", 25'000), RewardReason::Correct},
      {"25,000 unclosed inline maths", repeat("\\( $42$ ", 25'000), RewardReason::Correct},
      {"a box of 5,000 nested parentheses", "\\boxed{" + repeat("(", kDeep) + "42" + repeat(")", kDeep) + "}",
       RewardReason::Wrong},
      // \text{\,} unwrapped and \, dropped, each in one pass: the answer is 42.
      {"200k wrappers in the box", "\\boxed{" + repeat("\\text{\\,}", kLong / 9) + "42}", RewardReason::Correct},
      {"invalid UTF-8 around the box", kInvalidUtf8 + " \\boxed{42} " + kInvalidUtf8, RewardReason::Correct},
      {"NUL bytes around the answer", kNuls + "\n#### 42\n" + kNuls, RewardReason::Correct},
      {"a NUL inside the box", std::string("\\boxed{4\0 2}", 12), RewardReason::Wrong},
      {"200k of braces", repeat("{", kLong / 2) + repeat("}", kLong / 2), RewardReason::NoAnswer},
      {"200k of backslashes", repeat("\\", kLong), RewardReason::NoAnswer},
  };
}

TEST(HostileText, MathRewardAnswersEveryOne) {
  for (const Hostile& h : hostileResponses()) {
    const RewardResult r = mathReward(h.response, "42");
    EXPECT_EQ(r.reason, h.math) << h.name << ": " << rewardReasonName(r.reason);
    EXPECT_EQ(r.reward, h.math == RewardReason::Correct ? 1.0 : 0.0) << h.name;
  }
}

TEST(HostileText, EveryTextRewardKindAnswers) {
  const RewardFunction regex(specOf("regex", R"(answer:\s*(\d+)\s*$)"));
  const RewardFunction exact(specOf("exact"));
  const RewardFunction choice(specOf("choice"));
  const RewardFunction math(specOf("math", R"(RESULT\s*=\s*(.+))"));
  for (const Hostile& h : hostileResponses()) {
    for (const RewardFunction* f : {&regex, &exact, &choice, &math}) {
      const RewardResult r = f->score(input(h.response, f == &choice ? "B" : "42"));
      EXPECT_TRUE(r.reason == RewardReason::Wrong || r.reason == RewardReason::NoAnswer ||
                  r.reason == RewardReason::Correct)
          << h.name << " (" << enumName(kRewardKindNames, f->spec().kind) << "): " << rewardReasonName(r.reason);
    }
  }
  EXPECT_EQ(regex.score(input(repeat("a", kLong) + " answer: 7")).reason, RewardReason::Correct);
  EXPECT_EQ(exact.score(input(repeat(" ", kLong) + "42" + repeat("\n", kLong), "42")).reason, RewardReason::Correct);
  EXPECT_EQ(choice.score(input(repeat("(", kLong) + "B" + repeat(")", kLong), "B")).reason, RewardReason::Correct);
  EXPECT_EQ(math.score(input(repeat("RESULT = 1\n", 10'000) + "RESULT = 42", "42")).reason, RewardReason::Correct);
}

TEST(HostileText, CodeExtractionAndToolCalls) {
  // A fence never closed over 200k lines of code is no code; a closed one after 200k is found.
  EXPECT_FALSE(extractCode("```python\n" + repeat("x = 1\n", kLong / 6)).has_value());
  const auto code = extractCode(repeat("prose ", kLong / 6) + "\n```python\nprint(42)\n```\n" + kInvalidUtf8);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, "print(42)\n");
  EXPECT_FALSE(extractCode(repeat("```\n", kDeep) + kNuls).value_or("").size() > kLong);

  // Tool calls: 5,000-deep JSON, a 200k-character argument, invalid UTF-8, NULs, no close.
  const ParsedToolCall deep =
      parseToolCall("<tool_call>" + repeat("{\"a\":", kDeep) + "1" + repeat("}", kDeep) + "</tool_call>");
  EXPECT_TRUE(deep.present);
  EXPECT_FALSE(deep.call.has_value());  // no "name"
  EXPECT_FALSE(deep.error.empty());
  const std::string big = repeat("print(1)\\n", kLong / 10);
  const ParsedToolCall large =
      parseToolCall(R"(<tool_call>{"name": "python", "arguments": {"code": ")" + big + R"("}}</tool_call>)");
  ASSERT_TRUE(large.call.has_value()) << large.error;
  EXPECT_EQ(large.call->arguments["code"].get<std::string>().size(), kLong - kLong / 10);
  for (const std::string& junk :
       {kInvalidUtf8, kNuls, repeat("[", kLong), std::string("{\"name\": \"") + kInvalidUtf8 + "\"}"}) {
    const ParsedToolCall p = parseToolCall("<tool_call>" + junk + "</tool_call>");
    EXPECT_TRUE(p.present);
    EXPECT_FALSE(p.call.has_value());
    EXPECT_FALSE(p.error.empty());
  }
  EXPECT_FALSE(parseToolCall("<tool_call>" + repeat("{", kLong)).call.has_value());
}

// The chat template renders a 200k message and the tokenizer encodes it; invalid UTF-8 is a
// clear error from the tokenizer, not a crash.
TEST(HostileText, ChatRenderingAndTokenizing) {
  const char* config = std::getenv("ASTRAFLOW_QWEN3_CONFIG");
  ASSERT_NE(config, nullptr) << "run under ctest";
  const std::filesystem::path fixture = std::filesystem::path(config).parent_path();
  const ChatTemplate chat = ChatTemplate::load(fixture);
  // The fixture keeps Qwen3's tokenizer.json compressed.
  test::TempDir dir;
  const std::string tokenizer_json = dir.file("tokenizer.json");
  ASSERT_EQ(
      std::system(fmt::format("xz -dc {} > {}", (fixture / "tokenizer.json.xz").string(), tokenizer_json).c_str()), 0);
  const auto tokenizer = HfTokenizer::load(tokenizer_json);
  const std::string answer = repeat("Let me think about it once more. ", kLong / 33) + deepBoxes("42");
  const std::string rendered = chat.render(nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "2 + 40?"}}, {{"role", "assistant"}, {"content", answer}}}));
  EXPECT_NE(rendered.find(answer), std::string::npos);
  const auto ids = tokenizer->encode(rendered);
  EXPECT_GT(ids.size(), kLong / 10);
  EXPECT_NE(tokenizer->decode(ids, false).find(deepBoxes("42")), std::string::npos);
  const std::string nul_text = "x" + kNuls + "y";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(nul_text), false), nul_text);
  try {
    tokenizer->encode("ok " + kInvalidUtf8);
    FAIL() << "invalid UTF-8 encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
}

// The reward call's limit: a code run past reward.timeout_seconds is reward 0, reason timeout,
// with the tests after it not started.
TEST(HostileText, RewardTimeout) {
  RewardSpec spec = specOf("code");
  spec.wall_seconds = 30;
  spec.timeout_seconds = 1.0;
  const RewardFunction code(spec);
  const std::string sleeper = "```python\nimport time\ntime.sleep(20)\n```";
  const RewardResult r =
      code.score(input(sleeper, "", R"([{"input": "", "output": ""}, {"input": "", "output": ""}])"));
  EXPECT_EQ(r.reason, RewardReason::Timeout);
  EXPECT_EQ(r.reward, 0.0);
  const CodeScore s =
      scoreCode(sleeper, R"([{"input": "", "output": ""}, {"input": "", "output": ""}])", codeRewardOptions(spec));
  ASSERT_EQ(s.report.tests.size(), 2u);
  EXPECT_EQ(s.report.tests[1].reason, RewardReason::Timeout);
  EXPECT_LT(s.report.tests[0].wall_seconds, 5.0);  // killed at the call's limit, not the run's 30 s
}

// `astraflow reward` answers every kind on every hostile response, one line each, exit 0.
TEST(HostileText, RewardCommandAnswersEveryKind) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "run under ctest";
  test::TempDir dir;
  const auto responses = hostileResponses();
  for (const char* kind : {"math", "regex", "exact", "choice", "code"}) {
    {
      std::ofstream in(dir.file("in.jsonl"));
      for (const Hostile& h : responses) {
        nlohmann::json line{{"response", h.response}, {"reference", "42"}};
        if (std::string(kind) == "code") line["tests"] = nlohmann::json::array({{{"input", ""}, {"output", "42"}}});
        in << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
    }
    const std::string pattern = std::string(kind) == "regex" ? " --pattern '4+2'" : "";
    const int rc = std::system(fmt::format("{} reward --kind {}{} < {} > {} 2>{}", cli, kind, pattern,
                                           dir.file("in.jsonl"), dir.file("out.jsonl"), dir.file("err.txt"))
                                   .c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << kind << ": the command died";
    EXPECT_EQ(WEXITSTATUS(rc), 0) << kind;
    std::ifstream out(dir.file("out.jsonl"));
    std::size_t lines = 0;
    for (std::string line; std::getline(out, line); ++lines) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_TRUE(j.contains("reason")) << kind << " line " << lines << ": " << line.substr(0, 200);
    }
    EXPECT_EQ(lines, responses.size()) << kind;
  }
}

}  // namespace
