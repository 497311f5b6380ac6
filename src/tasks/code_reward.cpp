// The `code` reward (include/astraflow/tasks/code_reward.hpp).
#include "astraflow/tasks/code_reward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>

namespace astraflow {
namespace {

std::string_view withoutTrailingSpace(std::string_view s) {
  const auto end = s.find_last_not_of(" \t\r\f\v");
  return end == std::string_view::npos ? std::string_view{} : s.substr(0, end + 1);
}

// Calls `line` for each line of `text` (without its '\n').
template <class Line>
void forEachLine(std::string_view text, Line line) {
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    line(text.substr(begin, end - begin));
    begin = end + 1;
  }
}

std::string normalisedOutput(std::string_view text) {
  std::string out;
  forEachLine(text, [&](std::string_view line) {
    out.append(withoutTrailingSpace(line));
    out.push_back('\n');
  });
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool isContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// At most `bytes` of the start (or of the end) of `s`, cut at a UTF-8 character boundary.
std::string headOf(std::string_view s, std::size_t bytes) {
  if (s.size() <= bytes) return std::string(s);
  while (bytes > 0 && isContinuationByte(s[bytes])) --bytes;
  return std::string(s.substr(0, bytes));
}
std::string tailOf(std::string_view s, std::size_t bytes) {
  if (s.size() <= bytes) return std::string(s);
  std::size_t from = s.size() - bytes;
  while (from < s.size() && isContinuationByte(s[from])) ++from;
  return std::string(s.substr(from));
}

// A fence line: three or more backticks after optional spaces; its info string (what follows
// them, trimmed) is returned, lowercased.
std::optional<std::string> fenceInfo(std::string_view line) {
  const auto first = line.find_first_not_of(" \t");
  if (first == std::string_view::npos || line.substr(first, 3) != "```") return std::nullopt;
  std::string_view rest = line.substr(first);
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of('`')));
  rest = withoutTrailingSpace(rest);
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(" \t")));
  std::string info(rest);
  std::transform(info.begin(), info.end(), info.begin(), [](unsigned char c) { return std::tolower(c); });
  return info;
}

RewardReason testReason(const SandboxResult& run, const CodeTest& test) {
  switch (run.outcome) {
    case SandboxOutcome::Timeout: return RewardReason::Timeout;
    case SandboxOutcome::MemoryLimit: return RewardReason::MemoryLimit;
    case SandboxOutcome::Crashed: return RewardReason::Crashed;
    case SandboxOutcome::OutputLimit: return RewardReason::Wrong;
    case SandboxOutcome::Exited: break;
  }
  if (run.exit_code != 0) return RewardReason::Wrong;
  if (test.kind == CodeTest::Kind::Assert) return RewardReason::Correct;
  return sameProgramOutput(run.stdout_text, test.output) ? RewardReason::Correct : RewardReason::Wrong;
}

CodeFailure failureOf(std::size_t index, const CodeTest& test, const SandboxResult& run) {
  CodeFailure f;
  f.index = index;
  f.test.kind = test.kind;
  f.test.input = headOf(test.input, kCodeFailureTextBytes);
  f.test.output = headOf(test.output, kCodeFailureTextBytes);
  f.test.code = headOf(test.code, kCodeFailureTextBytes);
  f.got = headOf(run.stdout_text, kCodeFailureTextBytes);
  f.error = tailOf(run.stderr_text, kCodeFailureTextBytes);
  f.outcome = run.outcome;
  f.exit_code = run.exit_code;
  f.signal = run.signal;
  return f;
}

}  // namespace

bool sameProgramOutput(std::string_view got, std::string_view expected) {
  return normalisedOutput(got) == normalisedOutput(expected);
}

namespace {

bool isPythonName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A call-based test as the APPS / TACO harness runs it: the function (a method of `Solution`
// where the program defines one) called with the input's arguments; its result (a tuple as a
// list) equal to the expected output, or to its only element (TACO wraps results in a list).
std::string callTest(const std::string& fn, const nlohmann::json& args, const nlohmann::json& want) {
  const nlohmann::json call_args = args.is_array() ? args : nlohmann::json::array({args});
  const auto literal = [](const nlohmann::json& v) {  // JSON text as a Python string literal
    return nlohmann::json(v.dump(-1, ' ', true)).dump(-1, ' ', true);
  };
  return fmt::format(
      "import json as _af_json\n"
      "_af_args = _af_json.loads({0})\n"
      "_af_want = _af_json.loads({1})\n"
      "_af_f = getattr(Solution(), '{2}') if 'Solution' in globals() else {2}\n"
      "_af_got = _af_f(*_af_args)\n"
      "if isinstance(_af_got, tuple):\n    _af_got = list(_af_got)\n"
      "assert _af_got == _af_want or [_af_got] == _af_want, "
      "'{2}(%r) returned %r, expected %r' % (_af_args, _af_got, _af_want)\n",
      literal(call_args), literal(want), fn);
}

// {"fn_name"?, "inputs": [...], "outputs": [...]} (APPS' and TACO's input_output): call-based
// tests with a function name, stdin/stdout ones without (a list of lines is joined).
std::optional<std::vector<CodeTest>> harnessTests(const nlohmann::json& j) {
  const auto& in = j["inputs"];
  const auto& out = j["outputs"];
  if (!in.is_array() || !out.is_array() || in.empty() || in.size() != out.size()) return std::nullopt;
  std::vector<CodeTest> tests;
  const bool call = j.contains("fn_name") && !j["fn_name"].is_null();
  if (call && (!j["fn_name"].is_string() || !isPythonName(j["fn_name"].get<std::string>()))) return std::nullopt;
  const auto text = [](const nlohmann::json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) return std::nullopt;
    std::string joined;
    for (const auto& line : v) {
      if (!line.is_string()) return std::nullopt;
      joined += line.get<std::string>() + "\n";
    }
    return joined;
  };
  for (std::size_t i = 0; i < in.size(); ++i) {
    CodeTest test;
    if (call) {
      test.kind = CodeTest::Kind::Assert;
      test.code = callTest(j["fn_name"].get<std::string>(), in[i], out[i]);
    } else {
      const auto input = text(in[i]), output = text(out[i]);
      if (!input || !output) return std::nullopt;
      test.input = *input;
      test.output = *output;
    }
    tests.push_back(std::move(test));
  }
  return tests;
}

}  // namespace

std::optional<std::vector<CodeTest>> parseCodeTests(std::string_view tests_json) {
  const auto j = nlohmann::json::parse(tests_json, nullptr, false);
  if (j.is_object() && j.contains("inputs") && j.contains("outputs")) return harnessTests(j);
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<CodeTest> tests;
  for (const auto& t : j) {
    CodeTest test;
    if (t.is_string() && !withoutTrailingSpace(t.get_ref<const std::string&>()).empty()) {
      test.kind = CodeTest::Kind::Assert;
      test.code = t.get<std::string>();
    } else if (t.is_object() && t.size() == 2 && t.contains("input") && t["input"].is_string() &&
               t.contains("output") && t["output"].is_string()) {
      test.input = t["input"].get<std::string>();
      test.output = t["output"].get<std::string>();
    } else {
      return std::nullopt;
    }
    tests.push_back(std::move(test));
  }
  return tests;
}

std::optional<std::string> extractCode(std::string_view response) {
  return extractFencedBlock(response, {"", "python", "python3", "py"});
}

std::optional<std::string> extractFencedBlock(std::string_view response, std::initializer_list<std::string_view> tags) {
  std::optional<std::string> last;
  bool inside = false, wanted = false;
  std::string block;
  forEachLine(response, [&](std::string_view line) {
    const auto info = fenceInfo(line);
    if (!inside) {
      if (!info) return;
      const std::string tag = info->substr(0, info->find_first_of(" \t"));
      inside = true;
      wanted = std::find(tags.begin(), tags.end(), tag) != tags.end();
      block.clear();
    } else if (info && info->empty()) {
      inside = false;
      if (wanted) last = block;
    } else {
      block.append(line);
      block.push_back('\n');
    }
  });
  // The last block being empty is no answer, as an empty last \boxed{} is for `math`.
  if (last && last->find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  return last;
}

CodeRunReport runCodeTests(const std::string& code, const std::vector<CodeTest>& tests,
                           const CodeRewardOptions& options) {
  CodeRunReport report;
  report.total = tests.size();
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const CodeTest& test = tests[i];
    SandboxRequest request;
    request.interpreter = options.interpreter;
    request.limits = options.limits;
    if (options.total_wall_seconds > 0) {
      const double left =
          options.total_wall_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left <= 0) {
        if (!report.first_failure) report.reason = RewardReason::Timeout;
        report.tests.resize(tests.size(), CodeTestOutcome{false, RewardReason::Timeout, 0});
        break;
      }
      request.limits.wall_seconds = std::min(request.limits.wall_seconds, left);
    }
    if (test.kind == CodeTest::Kind::Stdio) {
      request.program = code;
      request.stdin_text = test.input;
    } else {
      request.program = code + "\n\n" + test.code + "\n";
    }
    const SandboxResult run = runSandboxed(request);
    CodeTestOutcome outcome;
    outcome.reason = testReason(run, test);
    outcome.passed = outcome.reason == RewardReason::Correct;
    outcome.wall_seconds = run.wall_seconds;
    report.tests.push_back(outcome);
    if (outcome.passed) {
      ++report.passed;
      continue;
    }
    if (!report.first_failure) {
      report.first_failure = failureOf(i, test, run);
      report.reason = outcome.reason;
    }
    if (options.all_or_nothing) break;  // the reward is 0 whatever the rest do
  }
  return report;
}

CodeScore scoreCode(std::string_view response, std::string_view tests_json, const CodeRewardOptions& options) {
  CodeScore score;
  const auto tests = parseCodeTests(tests_json);
  if (!tests) {
    score.result = {0.0, RewardReason::Invalid, ""};
    score.report.reason = RewardReason::Invalid;
    return score;
  }
  const auto code = extractCode(response);
  if (!code) {
    score.result = {0.0, RewardReason::NoAnswer, ""};
    score.report.total = tests->size();
    score.report.reason = RewardReason::NoAnswer;
    return score;
  }
  score.report = runCodeTests(*code, *tests, options);
  const bool all = score.report.passed == score.report.total;
  const double fraction = static_cast<double>(score.report.passed) / static_cast<double>(score.report.total);
  score.result = {options.all_or_nothing ? (all ? 1.0 : 0.0) : fraction, score.report.reason, *code};
  return score;
}

}  // namespace astraflow
