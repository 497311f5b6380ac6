// `astraflow reward`: responses on stdin scored with a RewardFunction (from --kind or a config's environment.reward),
// one {"reward", "reason", "answer"} line each, for checking a reward set-up by hand.
#include "apps/reward_command.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/json_lines.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/reward_function.hpp"

namespace astraflow {

struct RewardArgs {
  std::string kind;       // --kind: a name of kRewardKindNames (empty: --config says)
  RewardSpec spec;        // what the config's environment.reward would say
  std::string reference;  // default reference (a line's "reference" wins)
  // code: each test's wall limit; command: the program's timeout (unset: each kind's default)
  double timeout = 0;
  int memory_mb = 0;                 // 0: the sandbox's default
  std::vector<std::string> command;  // one "PROG ARGS" (split at spaces) or the argv word by word
  std::string config;                // a run config whose environment.reward is the spec
};

namespace {

using json = nlohmann::ordered_json;

std::string answerLine(const RewardResult& r, json extra = json::object()) {
  json line{{"reward", r.reward}, {"reason", rewardReasonName(r.reason)}, {"answer", r.answer}};
  line.update(extra);
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

RewardSpec specOf(const RewardArgs& a) {
  RewardSpec spec = a.spec;
  if (a.timeout > 0 && spec.kind == RewardKind::Http) spec.timeout_seconds = a.timeout;
  if (a.timeout > 0 && spec.kind != RewardKind::Http)
    (spec.kind == RewardKind::Command ? spec.command_timeout : spec.wall_seconds) = a.timeout;
  if (a.memory_mb > 0) spec.memory_mb = static_cast<std::uint64_t>(a.memory_mb);
  if (a.command.size() == 1) {
    std::istringstream words(a.command.front());
    for (std::string w; words >> w;) spec.command.push_back(w);
  } else {
    spec.command = a.command;
  }
  return spec;
}

// One input line per stdin line (answerJsonLines: bad lines are answered in place, exit 3):
// {"response", "reference"} for the text kinds, {"response", "tests"} for code, {"response",
// "reference", "prompt", "metadata"} for command; one {"reward", "reason", "answer", …} line each.
int rewardCommand(RewardArgs a) {
  if (!a.config.empty()) {
    try {
      a.spec = loadConfig(a.config).environment.reward;
    } catch (const Error& e) {
      std::fprintf(stderr, "astraflow: %s\n", e.what());
      return 2;
    }
  } else if (a.kind.empty()) {
    std::fprintf(stderr, "astraflow: reward needs --kind or --config\n");
    return 2;
  } else {
    a.spec.kind = enumByName(kRewardKindNames, a.kind).value();  // CLI11 checked the name
  }
  const RewardSpec spec = specOf(a);
  if (spec.kind == RewardKind::Command && spec.command.empty()) {
    std::fprintf(stderr, "astraflow: reward --kind command needs --command \"PROGRAM ARGS\"\n");
    return 2;
  }
  if (spec.kind == RewardKind::Http && spec.url.empty()) {
    std::fprintf(stderr, "astraflow: reward --kind http needs --url http://HOST:PORT/PATH\n");
    return 2;
  }
  if ((spec.persistent || spec.max_items > 0) && spec.kind != RewardKind::Command) {
    std::fprintf(stderr, "astraflow: reward --persistent and --max-items are for --kind command\n");
    return 2;
  }
  std::optional<RewardFunction> compiled;
  try {
    compiled.emplace(spec);
  } catch (const Error& e) {
    if (spec.kind != RewardKind::Regex || !spec.pattern.empty()) {  // regex may take each line's pattern
      std::fprintf(stderr, "astraflow: %s\n", e.what());
      return 2;
    }
  }
  const int rc = answerJsonLines("reward", [&](const json& input) {
    if (!compiled && !input.contains("pattern")) throw Error("a regex line needs \"pattern\" (or give --pattern)");
    if (!input.is_object() || !input.contains("response") || !input["response"].is_string())
      throw Error("a line is {\"response\": \"...\", ...}");
    const std::string response = input["response"].get<std::string>();
    if (spec.kind == RewardKind::Code) {
      if (!input.contains("tests")) throw Error("a code line needs \"tests\": [...]");
      const json& tests = input["tests"];
      const CodeScore s =
          scoreCode(response, tests.is_string() ? tests.get<std::string>() : tests.dump(), codeRewardOptions(spec));
      return answerLine(s.result, {{"passed", s.report.passed}, {"total", s.report.total}});
    }
    const std::string reference = input.value("reference", a.reference);
    const std::string prompt = input.value("prompt", "");
    const std::string metadata = input.value("metadata", json::object()).dump();
    if (input.contains("pattern")) {  // this line's own pattern; an error is this line's
      RewardSpec line_spec = spec;
      line_spec.pattern = input.value("pattern", spec.pattern);
      return answerLine(RewardFunction(line_spec).score({response, reference, "", prompt, metadata}));
    }
    return answerLine(compiled->score({response, reference, "", prompt, metadata}));
  });
  if (spec.persistent || spec.kind == RewardKind::Http) {
    const RewardWorkerCounters c = sharedRewardWorkerCounters();
    std::fprintf(stderr,
                 "astraflow: reward: %llu items; %llu %s started (%llu restarts), %llu crashed, %llu timed out, "
                 "%llu invalid\n",
                 static_cast<unsigned long long>(c.items), static_cast<unsigned long long>(c.started),
                 spec.kind == RewardKind::Http ? "connections" : "workers", static_cast<unsigned long long>(c.restarts),
                 static_cast<unsigned long long>(c.crashed), static_cast<unsigned long long>(c.timeouts),
                 static_cast<unsigned long long>(c.invalid));
  }
  return rc;
}

}  // namespace

RewardCommand addRewardCommand(CLI::App& app) {
  RewardCommand c;
  c.args = std::make_shared<RewardArgs>();
  RewardArgs& a = *c.args;
  auto* cmd = app.add_subcommand("reward",
                                 "score responses with a verifiable reward; stdin: one {\"response\": ..., "
                                 "\"reference\": ...} (code: \"tests\") per line (docs/tasks.md)");
  auto* kind = cmd->add_option("--kind", a.kind, "math, exact, regex, choice, code, command or http")
                   ->check(CLI::IsMember({"math", "exact", "regex", "choice", "code", "command", "http"}));
  auto* config = cmd->add_option("--config", a.config,
                                 "a run config: score as its environment.reward says (instead of --kind and the "
                                 "options that describe a reward; --reference, --timeout, --memory-mb still apply)");
  cmd->add_option("--reference", a.reference, "the reference for lines that carry none");
  cmd->add_option("--pattern", a.spec.pattern,
                  "regex: the pattern to find; math: the answer pattern used without \\boxed{}");
  cmd->add_option("--decimals", a.spec.decimals,
                  "math: an answer written with a decimal point is compared rounded to this many places (default 6)")
      ->check(CLI::Range(0, 30));
  cmd->add_option("--interpreter", a.spec.interpreter,
                  "code: the interpreter the tests run with (default /usr/bin/python3)");
  cmd->add_flag("--all-or-nothing", a.spec.all_or_nothing,
                "code: reward 1 only when every test passes (else the fraction)");
  cmd->add_option("--timeout", a.timeout,
                  "code: wall seconds per test (default 10); command: seconds the program may take per item (default "
                  "30); http: seconds a request may take (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory-mb", a.memory_mb, "code: address-space limit of a test's run in MiB (default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--command", a.command,
                  "command: the verifier, as one \"PROGRAM ARGS\" (split at spaces) or word by word, repeated");
  cmd->add_flag("--persistent", a.spec.persistent,
                "command: start the program once; it reads one object per line and answers one line each");
  cmd->add_option("--max-items", a.spec.max_items, "command --persistent: start it again after this many items");
  cmd->add_option("--url", a.spec.url, "http: the verifier's URL (http://HOST:PORT/PATH); the object is POSTed");
  for (const char* name : {"--pattern", "--decimals", "--interpreter", "--all-or-nothing", "--command", "--persistent",
                           "--max-items", "--url"})
    config->excludes(cmd->get_option(name));
  config->excludes(kind);
  c.command = cmd;
  return c;
}

int RewardCommand::run() const {
  if (command && *command) return rewardCommand(*args);
  return -1;
}

}  // namespace astraflow
