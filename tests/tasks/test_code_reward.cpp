// The `code` reward (extraction, tests format, output comparison, reward and reasons over real
// sandboxed runs, the failure report), the `command` reward against a verifier script written
// here, and `astraflow reward --kind code|command` end to end.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/code_reward.hpp"
#include "astraflow/tasks/command_reward.hpp"
#include "io/temp_dir.hpp"
#include "tasks/process_watch.hpp"

using namespace astraflow;

namespace code_reward_tests {

std::string fenced(const std::string& code) { return "Here is my solution:\n```python\n" + code + "```\nDone."; }

CodeRewardOptions quick() {
  CodeRewardOptions o;
  o.limits.wall_seconds = 3;
  o.limits.memory_bytes = 256ULL << 20;
  return o;
}

const std::string kDoubler = "n = int(input())\nprint(n * 2)\n";

TEST(CodeReward, ExtractsTheLastPythonBlock) {
  EXPECT_EQ(extractCode("```python\nprint(1)\n```"), "print(1)\n");
  EXPECT_EQ(extractCode("```py\nprint(1)\n```"), "print(1)\n");
  EXPECT_EQ(extractCode("```Python3\nprint(1)\n```"), "print(1)\n");
  EXPECT_EQ(extractCode("text\n```\nprint(2)\n```\n"), "print(2)\n");
  EXPECT_EQ(extractCode("```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```"), "print(2)\n");
  // Other languages are not the answer; the Python block before one still is.
  EXPECT_EQ(extractCode("```python\nprint(1)\n```\n```bash\nls\n```"), "print(1)\n");
  EXPECT_EQ(extractCode("```c\nint main(){}\n```"), std::nullopt);
  // Indented fences, a fence line inside a block that is not a bare closing fence, CRLF.
  EXPECT_EQ(extractCode("  ```python\n  x = 1\n  ```"), "  x = 1\n");
  EXPECT_EQ(extractCode("```python\ns = '```py'\n```"), "s = '```py'\n");
  EXPECT_EQ(extractCode("```python\r\nprint(1)\r\n```\r\n"), "print(1)\r\n");
  // No code: no fence, an unclosed fence (cut off), an empty last block.
  EXPECT_EQ(extractCode("print(1)"), std::nullopt);
  EXPECT_EQ(extractCode("```python\nprint(1)\n"), std::nullopt);
  EXPECT_EQ(extractCode("```python\nprint(1)\n```\n```python\n\n```"), std::nullopt);
}

TEST(CodeReward, ParsesTheTestsFormat) {
  const auto tests = parseCodeTests(R"([{"input": "1\n", "output": "2\n"}, "assert f(1) == 2"])");
  ASSERT_TRUE(tests);
  ASSERT_EQ(tests->size(), 2U);
  EXPECT_EQ((*tests)[0].kind, CodeTest::Kind::Stdio);
  EXPECT_EQ((*tests)[0].input, "1\n");
  EXPECT_EQ((*tests)[0].output, "2\n");
  EXPECT_EQ((*tests)[1].kind, CodeTest::Kind::Assert);
  EXPECT_EQ((*tests)[1].code, "assert f(1) == 2");
  for (const char* bad : {"", "not json", "[]", "{}", R"([{"input": "1"}])", R"([{"input": 1, "output": "2"}])",
                          R"([{"input": "1", "output": "2", "extra": 3}])", "[3]", R"([" "])", R"("assert 1")"})
    EXPECT_FALSE(parseCodeTests(bad)) << bad;
}

TEST(CodeReward, ComparesOutputsModuloTrailingWhitespace) {
  EXPECT_TRUE(sameProgramOutput("1 2 \n3\t\n\n\n", "1 2\n3"));
  EXPECT_TRUE(sameProgramOutput("a\r\nb\r\n", "a\nb\n"));
  EXPECT_FALSE(sameProgramOutput(" 1\n", "1\n"));         // leading whitespace counts
  EXPECT_FALSE(sameProgramOutput("1\n\n2\n", "1\n2\n"));  // an inner blank line counts
  EXPECT_FALSE(sameProgramOutput("12\n", "1 2\n"));
}

TEST(CodeReward, StdinStdoutAndAssertTests) {
  const std::string stdio = R"([{"input": "2\n", "output": "4\n"}, {"input": "-5", "output": "-10"}])";
  RewardResult r = codeReward(fenced(kDoubler), stdio, quick());
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, RewardReason::Correct);
  EXPECT_EQ(r.answer, kDoubler);
  const std::string asserts = R"(["assert add(2, 3) == 5", "assert add(-1, 1) == 0"])";
  r = codeReward(fenced("def add(a, b):\n    return a + b\n"), asserts, quick());
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, RewardReason::Correct);
  r = codeReward(fenced("def add(a, b):\n    return a - b\n"), asserts, quick());
  EXPECT_EQ(r.reward, 0.0);  // add(-1, 1) is -2: both fail
  EXPECT_EQ(r.reason, RewardReason::Wrong);
}

TEST(CodeReward, FractionOrAllOrNothing) {
  // Right for 1 and 2, wrong for 3.
  const std::string program = "n = int(input())\nprint(n * 2 if n < 3 else 0)\n";
  const std::string tests = R"([{"input": "1", "output": "2"}, {"input": "3", "output": "6"},
                                {"input": "2", "output": "4"}])";
  CodeScore s = scoreCode(fenced(program), tests, quick());
  EXPECT_DOUBLE_EQ(s.result.reward, 2.0 / 3.0);
  EXPECT_EQ(s.result.reason, RewardReason::Wrong);
  EXPECT_EQ(s.report.passed, 2U);
  EXPECT_EQ(s.report.total, 3U);
  ASSERT_EQ(s.report.tests.size(), 3U);
  EXPECT_TRUE(s.report.tests[0].passed);
  EXPECT_FALSE(s.report.tests[1].passed);
  ASSERT_TRUE(s.report.first_failure);
  EXPECT_EQ(s.report.first_failure->index, 1U);
  EXPECT_EQ(s.report.first_failure->test.input, "3");
  EXPECT_EQ(s.report.first_failure->test.output, "6");
  EXPECT_EQ(s.report.first_failure->got, "0\n");
  CodeRewardOptions all = quick();
  all.all_or_nothing = true;
  s = scoreCode(fenced(program), tests, all);
  EXPECT_EQ(s.result.reward, 0.0);
  EXPECT_EQ(s.report.tests.size(), 2U);  // stopped at the first failure
  s = scoreCode(fenced(kDoubler), tests, all);
  EXPECT_EQ(s.result.reward, 1.0);
}

// APPS' and TACO's tests ({"fn_name", "inputs", "outputs"}, also DeepCoder's): the function is
// called with each input's arguments, on a Solution() where the program defines one (LeetCode
// style); a tuple result equals a list, and a result equals a one-element list of it (TACO wraps
// its outputs). Without fn_name the lists are stdin/stdout pairs.
TEST(CodeReward, CallBasedTestsRunAsTheHarnessesRunThem) {
  const std::string calls = R"({"fn_name": "add", "inputs": [[1, 2], [-3, 4], [[1], [2]]], "outputs": [3, 1, [1, 2]]})";
  const std::string wrapped = R"({"fn_name": "add", "inputs": [[1, 2], ["a", "b"]], "outputs": [[3], ["ab"]]})";
  const std::string plain = "def add(a, b):\n    return a + b\n";
  const std::string method = "class Solution:\n    def add(self, a, b):\n        return a + b\n";
  const std::string pair = "def add(a, b):\n    return (a, b)\n";
  for (const auto& program : {plain, method}) {
    EXPECT_EQ(scoreCode(fenced(program), calls, quick()).result.reward, 1.0) << program;
    EXPECT_EQ(scoreCode(fenced(program), wrapped, quick()).result.reward, 1.0) << program;
  }
  // A tuple is compared as a list: add returns (1, 2) for [1, 2].
  EXPECT_DOUBLE_EQ(
      scoreCode(fenced(pair), R"({"fn_name": "add", "inputs": [[1, 2]], "outputs": [[1, 2]]})", quick()).result.reward,
      1.0);
  // A wrong result fails, saying what it returned.
  const CodeScore s = scoreCode(fenced("def add(a, b):\n    return a - b\n"), calls, quick());
  EXPECT_DOUBLE_EQ(s.result.reward, 0.0);
  ASSERT_TRUE(s.report.first_failure);
  EXPECT_NE(s.report.first_failure->error.find("add([1, 2]) returned -1, expected 3"), std::string::npos)
      << s.report.first_failure->error;
  // Without fn_name: stdin and stdout, a list of lines joined.
  EXPECT_EQ(
      scoreCode(fenced(kDoubler), R"({"inputs": ["2\n", ["5"]], "outputs": ["4\n", ["10"]]})", quick()).result.reward,
      1.0);
  // Not usable: a name that is not Python's, lists of different lengths, no tests.
  for (const char* bad : {R"({"fn_name": "a b", "inputs": [[1]], "outputs": [1]})",
                          R"({"fn_name": "f", "inputs": [[1], [2]], "outputs": [1]})",
                          R"({"fn_name": "f", "inputs": [], "outputs": []})"})
    EXPECT_EQ(scoreCode(fenced(plain), bad, quick()).result.reason, RewardReason::Invalid) << bad;
}

TEST(CodeReward, ReasonsOfFailingPrograms) {
  const test::HostSnapshot host;
  const std::string one = R"([{"input": "1", "output": "2"}])";
  CodeRewardOptions o = quick();
  o.limits.wall_seconds = 1;
  struct Expectation {
    const char* program;
    RewardReason reason;
  };
  const std::vector<Expectation> cases = {
      {"while True:\n    pass\n", RewardReason::Timeout},
      {"import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
       RewardReason::Timeout},
      {"with open('big', 'wb') as f:\n    for _ in range(1024):\n        f.write(bytes(2 ** 20))\n",
       RewardReason::Wrong},  // past the file limit: Python's OSError (File too large)
      {"x = bytearray(2 * 1024 ** 3)\n", RewardReason::MemoryLimit},
      {"import ctypes\nctypes.string_at(0)\n", RewardReason::Crashed},
      {"raise ValueError('no')\n", RewardReason::Wrong},
      {"print(\n", RewardReason::Wrong},  // a syntax error exits 1
      {"import os\nfor target in (os.getppid(), 1, -1):\n    try:\n        os.kill(target, 9)\n    except OSError:\n"
       "        pass\nwhile True:\n    pass\n",
       RewardReason::Timeout},  // the host survives to time it out
      {"import socket\nsocket.create_connection(('127.0.0.1', 22))\nprint(2)\n", RewardReason::Wrong},
      {"print(open('/etc/shadow').read())\n", RewardReason::Wrong},
  };
  for (const Expectation& c : cases) {
    const CodeScore s = scoreCode(fenced(c.program), one, o);
    EXPECT_EQ(s.result.reward, 0.0) << c.program;
    EXPECT_EQ(rewardReasonName(s.result.reason), std::string(rewardReasonName(c.reason))) << c.program;
  }
  const CodeScore s = scoreCode(fenced("raise ValueError('the reason')\n"), one, o);
  ASSERT_TRUE(s.report.first_failure);
  EXPECT_NE(s.report.first_failure->error.find("ValueError: the reason"), std::string::npos);
  EXPECT_EQ(s.report.first_failure->exit_code, 1);
  EXPECT_EQ(codeReward("no code here", one, o).reason, RewardReason::NoAnswer);
  EXPECT_EQ(codeReward(fenced(kDoubler), "[", o).reason, RewardReason::Invalid);
  EXPECT_EQ(codeReward(fenced(kDoubler), "[]", o).reason, RewardReason::Invalid);
  host.expectUnchanged();
}

// ---- command ----------------------------------------------------------------------------

// A verifier whose behaviour its first argument picks.
const char* kVerifier = R"(import json, os, subprocess, sys, time
task = json.load(sys.stdin)
mode = sys.argv[1]
if mode == "good":
    ok = task["response"].strip() == task["reference"] and "PATH" in os.environ
    print(json.dumps({"reward": 1.0 if ok else 0.0, "reason": "correct" if ok else "wrong",
                      "answer": task["metadata"]["id"]}))
elif mode == "fail":
    sys.exit(3)
elif mode == "garbage":
    print("reward: 1")
elif mode == "nan":
    print('{"reward": NaN}')
elif mode == "huge":
    print('{"reward": 1e999}')
elif mode == "text":
    print('{"reward": "1"}')
elif mode == "reason":
    print('{"reward": 1, "reason": "great"}')
elif mode == "sleep":
    subprocess.Popen([sys.argv[0] + "-child", "1000"], executable="/bin/sleep")
    time.sleep(1000)
)";

class CommandReward : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir.file("verify.py")) << kVerifier; }
  RewardResult run(const std::string& mode, const std::string& response = "42", double timeout = 10) {
    CommandRewardOptions o;
    o.argv = {"python3", dir.file("verify.py"), mode};
    o.timeout_seconds = timeout;
    const nlohmann::json input = {
        {"prompt", "6*7?"}, {"response", response}, {"reference", "42"}, {"metadata", {{"id", "q1"}}}};
    return commandReward(input.dump(), o);
  }
  test::TempDir dir;
};

TEST_F(CommandReward, GoodAnswerAndFailures) {
  const test::HostSnapshot host;
  RewardResult r = run("good");
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, RewardReason::Correct);
  EXPECT_EQ(r.answer, "q1");
  r = run("good", "41");
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_EQ(r.reason, RewardReason::Wrong);
  EXPECT_EQ(run("fail").reason, RewardReason::Crashed);
  for (const char* mode : {"garbage", "nan", "huge", "text", "reason"}) {
    r = run(mode);
    EXPECT_EQ(r.reason, RewardReason::Invalid) << mode;
    EXPECT_EQ(r.reward, 0.0) << mode;
  }
  host.expectUnchanged();
}

TEST_F(CommandReward, KilledAtItsTimeoutWithWhatItStarted) {
  const test::HostSnapshot host;
  const auto start = std::chrono::steady_clock::now();
  const RewardResult r = run("sleep", "42", 0.5);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.reason, RewardReason::Timeout);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_LT(seconds, 3.0);
  // Its child got the SIGKILL with it; outside a PID namespace its end is not waited for.
  for (int i = 0; i < 200 && !test::processesWith(dir.file("verify.py")).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(test::processesWith(dir.file("verify.py")).empty()) << "the verifier or its child is left";
  host.expectUnchanged();
  CommandRewardOptions missing;
  missing.argv = {"/no/such/verifier"};
  EXPECT_THROW(commandReward("{}", missing), Error);
}

// ---- the CLI ----------------------------------------------------------------------------

std::vector<nlohmann::json> runCli(const std::string& args, const std::vector<nlohmann::json>& lines,
                                   const test::TempDir& dir, int& exit_code) {
  {
    std::ofstream in(dir.file("in.jsonl"));
    for (const auto& line : lines) in << line.dump() << "\n";
    in << "not json\n";
  }
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  const int rc = std::system(
      fmt::format("{} reward {} < {} > {} 2>/dev/null", cli, args, dir.file("in.jsonl"), dir.file("out.jsonl"))
          .c_str());
  exit_code = WEXITSTATUS(rc);
  std::ifstream out(dir.file("out.jsonl"));
  std::vector<nlohmann::json> answers;
  for (std::string line; std::getline(out, line);) answers.push_back(nlohmann::json::parse(line));
  return answers;
}

TEST(RewardCli, CodeAndCommandThroughTheCommand) {
  ASSERT_NE(std::getenv("ASTRAFLOW_CLI"), nullptr) << "run under ctest";
  test::TempDir dir;
  const nlohmann::json tests = nlohmann::json::parse(R"([{"input": "2", "output": "4"}, "assert double(3) == 6"])");
  const std::string with_stdin =
      "import sys\nwords = sys.stdin.read().split()\nif words:\n    print(double(int(words[0])))\n";
  int rc = 0;
  auto out = runCli("--kind code --timeout 2 --memory-mb 256",
                    {{{"response", fenced("def double(n):\n    return 2 * n\n" + with_stdin)}, {"tests", tests}},
                     // Right for the assert, wrong for stdin/stdout; the tests as a JSON string.
                     {{"response", fenced("def double(n):\n    return n + 3\n" + with_stdin)}, {"tests", tests.dump()}},
                     {{"response", "no code"}, {"tests", tests}}},
                    dir, rc);
  EXPECT_EQ(rc, 3);
  ASSERT_EQ(out.size(), 4U);
  EXPECT_EQ(out[0]["reward"], 1.0);
  EXPECT_EQ(out[0]["reason"], "correct");
  EXPECT_EQ(out[0]["passed"], 2);
  EXPECT_EQ(out[0]["total"], 2);
  EXPECT_EQ(out[1]["reward"], 0.5);
  EXPECT_EQ(out[1]["reason"], "wrong");
  EXPECT_EQ(out[1]["passed"], 1);
  EXPECT_EQ(out[2]["reason"], "no_answer");
  EXPECT_TRUE(out[3].contains("error"));
  out = runCli("--kind code --all-or-nothing", {{{"response", fenced("print(5)\n")}, {"tests", tests}}}, dir, rc);
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0]["reward"], 0.0);

  std::ofstream(dir.file("verify.py")) << kVerifier;
  out = runCli(fmt::format("--kind command --command 'python3 {} good' --reference 42", dir.file("verify.py")),
               {{{"response", "42"}, {"metadata", {{"id", "a"}}}},
                {{"response", "7"}, {"reference", "7"}, {"metadata", {{"id", "b"}}}},
                {{"response", "41"}, {"metadata", {{"id", "c"}}}}},
               dir, rc);
  ASSERT_EQ(out.size(), 4U);
  EXPECT_EQ(out[0]["reward"], 1.0);
  EXPECT_EQ(out[0]["answer"], "a");
  EXPECT_EQ(out[1]["reward"], 1.0);  // the line's reference wins
  EXPECT_EQ(out[2]["reason"], "wrong");
  EXPECT_TRUE(out[3].contains("error"));
}

}  // namespace code_reward_tests
