#pragma once
// The `code` reward (docs/tasks.md): the response's last fenced Python block, run in the
// sandbox (sandbox.hpp) against a list of tests — stdin/stdout pairs or assert snippets — one
// sandboxed run per test. The reward is the fraction passed (or 1/0), the reason that of the
// first failing test; the per-test report is kept for workflows that show the policy what
// failed.
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/tasks/reward.hpp"
#include "astraflow/tasks/sandbox.hpp"

namespace astraflow {

struct CodeTest {
  enum class Kind { Stdio, Assert };
  Kind kind = Kind::Stdio;
  std::string input;   // Stdio: the program's stdin
  std::string output;  // Stdio: the stdout it must print (trailing whitespace aside)
  std::string code;    // Assert: Python run after the program, in the same file; passes on exit 0
};

// The tests of `tests_json`: a non-empty JSON list of {"input": "...", "output": "..."} objects
// and strings of Python code; or APPS' and TACO's object {"fn_name", "inputs", "outputs"} —
// with a function name, each input the call's arguments and each output its result (the call
// run after the program, on a `Solution()` where the program defines that class); without one,
// stdin/stdout pairs. nullopt when it is anything else.
std::optional<std::vector<CodeTest>> parseCodeTests(std::string_view tests_json);

// The content of the last closed ``` fence tagged python, python3, py (any case) or untagged;
// nullopt when there is none (an unclosed fence — a response cut off at its token limit — is
// not code). A fence opens and closes at the start of a line (spaces before it allowed).
std::optional<std::string> extractCode(std::string_view response);
// The same for blocks whose tag (lowercased; "" for an untagged fence) is one of `tags`: the code
// workflows read a test-case generator's ```json block with it.
std::optional<std::string> extractFencedBlock(std::string_view response, std::initializer_list<std::string_view> tags);

// Equal as stdout: every line with its trailing whitespace dropped, trailing empty lines dropped.
bool sameProgramOutput(std::string_view got, std::string_view expected);

struct CodeRewardOptions {
  std::string interpreter = "/usr/bin/python3";
  SandboxLimits limits;         // for each test's run
  bool all_or_nothing = false;  // reward 1 only when every test passes; stops at the first failure
  // All the tests' runs together (reward.timeout_seconds; 0: no limit beyond each run's): a run
  // gets what is left of it, and tests not started when it is spent fail with reason timeout.
  double total_wall_seconds = 0;
};

struct CodeTestOutcome {
  bool passed = false;
  RewardReason reason = RewardReason::Wrong;  // Correct when passed
  double wall_seconds = 0;
};

// The first test that failed, its texts cut to kCodeFailureTextBytes (the end of stderr kept).
inline constexpr std::size_t kCodeFailureTextBytes = 2048;
struct CodeFailure {
  std::size_t index = 0;
  CodeTest test;
  std::string got;    // its stdout
  std::string error;  // the end of its stderr (a traceback's last lines)
  SandboxOutcome outcome = SandboxOutcome::Exited;
  int exit_code = -1, signal = 0;
};

struct CodeRunReport {
  std::vector<CodeTestOutcome> tests;  // one per test run (all_or_nothing: up to the first failure)
  std::size_t passed = 0;
  std::size_t total = 0;                        // every test given, run or not
  RewardReason reason = RewardReason::Correct;  // Correct, or the first failure's reason
  std::optional<CodeFailure> first_failure;
};

// Runs `code` against each test. A test fails as `wrong` when its run exited with a wrong
// output, a failed assert, any non-zero exit (an uncaught exception) or output past the limit;
// as `timeout`, `memory_limit` or `crashed` (ended by a signal) after the sandbox's outcome.
CodeRunReport runCodeTests(const std::string& code, const std::vector<CodeTest>& tests,
                           const CodeRewardOptions& options);

struct CodeScore {
  RewardResult result;  // answer: the extracted code
  CodeRunReport report;
};
// no_answer without a code block, invalid for tests that do not parse (nothing is run then).
CodeScore scoreCode(std::string_view response, std::string_view tests_json, const CodeRewardOptions& options = {});
inline RewardResult codeReward(std::string_view response, const std::string& tests_json,
                               const CodeRewardOptions& options = {}) {
  return scoreCode(response, tests_json, options).result;
}

}  // namespace astraflow
