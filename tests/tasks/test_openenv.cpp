// The `openenv` environment against real servers on 127.0.0.1: the example written with
// openenv-core (examples/openenv_guess/server.py) and a server that misbehaves on purpose
// (openenv_faulty_server.py), and its MCP-style twin (examples/openenv_tools/server.py, an
// MCPEnvironment). Each server is started by the environment itself (command).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "astraflow/text/chat_template.hpp"
#include "tasks/openenv_fixture.hpp"

using namespace astraflow;
using json = nlohmann::ordered_json;

namespace openenv_tests {

TEST(OpenEnv, ConcurrentEpisodesPlayTheirOwnGamesOnTheOpenEnvCoreExample) {
  Fixture f = guessGame();
  f.options.openenv.reset_json = R"({"turns": 5})";
  f.options.openenv.observation_field = "prompt";
  const OpenEnvCounters before = sharedOpenEnvCounters();

  // Twelve sessions at once, then the same seeds one at a time: the same numbers.
  std::vector<std::unique_ptr<Environment>> envs;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t k = 0; k < 12; ++k) {
    envs.push_back(makeEnvironment(f.options));
    seeds.push_back(envs.back()->trainingId(k));
  }
  const std::vector<int> together = playAll(envs, seeds);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    std::vector<std::unique_ptr<Environment>> one;
    one.push_back(makeEnvironment(f.options));
    EXPECT_EQ(playAll(one, {seeds[i]}), std::vector<int>{together[i]}) << "seed " << seeds[i];
  }
  std::set<int> distinct(together.begin(), together.end());
  EXPECT_GT(distinct.size(), 4U);  // the seeds draw different games

  // The prompt is the policy's chat template over the observation's `prompt` field, as a user turn.
  auto env = makeEnvironment(f.options);
  const std::string prompt = env->reset(envs.front()->heldOutId(0));
  const ChatTemplate chat = ChatTemplate::load(f.dir.file("model"));
  ChatOptions o;
  o.add_generation_prompt = true;
  const std::string first =
      "I am thinking of a whole number from 1 to 16. You have 5 guesses; after each wrong one I say whether my "
      "number is higher or lower. Answer with the number only.";
  EXPECT_EQ(prompt, chat.render(json::array({{{"role", "user"}, {"content", first}}}), o));
  EXPECT_EQ(envs.front()->heldOutId(0), 1000000U);  // held-out seeds start at eval_seed_start
  const StepResult s = env->step("no idea");
  EXPECT_FALSE(s.done);
  EXPECT_EQ(
      s.observation,
      chat.continuation({{"role", "user"}, {"content", "That is not a number. Answer with the number only."}}, o));

  const OpenEnvCounters c = sharedOpenEnvCounters();
  EXPECT_EQ(c.errors - before.errors, 0U);
  EXPECT_EQ(c.malformed - before.malformed, 0U);
  EXPECT_GE(c.sessions - before.sessions, 25U);
}

TEST(OpenEnv, AKilledServerEndsItsEpisodesWithEnvErrorAndIsStartedAgain) {
  Fixture f = guessGame();
  // A copy of the example: a server of its own (the other test's stays), found by its path.
  std::filesystem::copy_file(f.options.openenv.command[1], f.dir.file("guess_to_kill.py"));
  f.options.openenv.command[1] = f.dir.file("guess_to_kill.py");
  const OpenEnvCounters before = sharedOpenEnvCounters();
  auto a = makeEnvironment(f.options);
  auto b = makeEnvironment(f.options);
  a->reset(1);
  b->reset(2);
  const auto pids = childrenRunning("guess_to_kill.py");
  ASSERT_FALSE(pids.empty());
  for (const int pid : pids) ASSERT_TRUE(test::killChildAndWait(pid));

  // The episode in flight ends (reward 0, env_error); the server is started again for the rest.
  const StepResult lost = a->step("8");
  EXPECT_TRUE(lost.done);
  EXPECT_EQ(lost.reason, "env_error");
  EXPECT_EQ(lost.reward, 0.0);
  const StepResult also = b->step("8");
  EXPECT_TRUE(also.done);
  EXPECT_EQ(also.reason, "env_error");
  const std::string prompt = a->reset(3);
  EXPECT_NE(prompt.find("from 1 to 16"), std::string::npos) << prompt;
  EXPECT_FALSE(a->step("8").reason == "env_error");
  const OpenEnvCounters c = sharedOpenEnvCounters();
  EXPECT_EQ(c.restarts - before.restarts, 1U);
  EXPECT_EQ(c.errors - before.errors, 2U);
  // The server's output went to its log in log_dir, one file per start.
  std::size_t logs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(f.dir.file("logs"))) logs += entry.is_regular_file();
  EXPECT_EQ(logs, 2U);
}

TEST(OpenEnv, EveryKindOfBadReplyEndsTheEpisodeCountedAndNeverThrows) {
  Fixture f = faultyServer();
  f.options.openenv.timeout_seconds = 1.0;
  const struct {
    const char* mode;
    const char* reason;
    bool malformed, timeout;
  } cases[] = {
      {"ok", "correct", false, false},       {"garbage", "env_error", true, false},
      {"error", "env_error", false, false},  {"wrong", "env_error", true, false},
      {"types", "env_error", true, false},   {"typeless", "env_error", true, false},
      {"slow", "timeout", false, true},      {"huge", "env_error", false, false},
      {"hangup", "env_error", false, false}, {"exit", "env_error", false, false},
      {"ok", "correct", false, false},
  };
  for (const auto& c : cases) {
    f.options.openenv.reset_json = json{{"mode", c.mode}}.dump();
    auto env = makeEnvironment(f.options);
    const OpenEnvCounters before = sharedOpenEnvCounters();
    const std::string prompt = env->reset(7);
    EXPECT_NE(prompt.find(std::string("mode ") + c.mode + ", seed 7"), std::string::npos) << prompt;
    const StepResult s = env->step("anything");
    EXPECT_TRUE(s.done) << c.mode;
    EXPECT_EQ(s.reason, c.reason) << c.mode;
    EXPECT_EQ(s.reward, std::string(c.reason) == "correct" ? 0.5 : 0.0) << c.mode;
    const OpenEnvCounters after = sharedOpenEnvCounters();
    EXPECT_EQ(after.errors - before.errors, std::string(c.reason) == "correct" ? 0U : 1U) << c.mode;
    EXPECT_EQ(after.malformed - before.malformed, c.malformed ? 1U : 0U) << c.mode;
    EXPECT_EQ(after.timeouts - before.timeouts, c.timeout ? 1U : 0U) << c.mode;
    // The server that exited was started again for the next case.
    EXPECT_EQ(after.restarts - before.restarts, std::string(c.mode) == "exit" ? 1U : 0U) << c.mode;
  }
}

// The server starts with the rank's first episode (the dataflow rank makes environments only for
// their problem ids). One that cannot start fails the episode (env_error, counted), never the rank:
// the reset's prompt names the reason, the error is logged once and the start is not tried again
// for each episode (5 s later at the earliest); a program that cannot run at all is never tried
// again, and openEnvUnavailable() says why (the rollout rank leaves its pool on it).
TEST(OpenEnv, AServerThatCannotStartFailsItsEpisodesNotTheRank) {
  Fixture f = faultyServer();
  f.options.openenv.command = {"/bin/sh", "-c", "echo no such environment >&2; exit 4", "{port}"};
  auto env = makeEnvironment(f.options);
  EXPECT_EQ(env->heldOutId(2), 1000002U);  // no server needed for ids, nor for a curator's metadata
  EXPECT_EQ(env->metadataOf(5), (std::map<std::string, std::string>{{"seed", "5"}}));
  const OpenEnvCounters before = sharedOpenEnvCounters();
  const auto started = std::chrono::steady_clock::now();
  for (int episode = 0; episode < 3; ++episode) {
    const std::string prompt = env->reset(static_cast<std::uint64_t>(episode));
    EXPECT_NE(prompt.find("could not be reached"), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("no such environment"), std::string::npos) << prompt;  // the server's own words
    const StepResult s = env->step("8");
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.reason, "env_error");
  }
  // One start tried (the later resets came within its backoff, at once), three episodes failed.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
  EXPECT_EQ(sharedOpenEnvCounters().errors - before.errors, 3U);
  EXPECT_TRUE(openEnvUnavailable().empty()) << "a server that started and exited may start next time";

  f.options.openenv.command = {"/nonexistent/python", "{port}"};
  const std::string prompt = makeEnvironment(f.options)->reset(0);
  EXPECT_NE(prompt.find("/nonexistent/python"), std::string::npos) << prompt;
  EXPECT_NE(openEnvUnavailable().find("/nonexistent/python"), std::string::npos) << openEnvUnavailable();
}

// environment.tools.mcp beside openenv: the calculator's tools (examples/mcp_calculator, the `mcp`
// SDK's) are shown in the prompt and answer their calls; every other turn is the game's.
TEST(OpenEnv, McpToolsAnswerTheirCallsAndTheOtherTurnsGoToTheServer) {
  const char* qwen3 = std::getenv("ASTRAFLOW_QWEN3_CONFIG");
  const char* calculator = std::getenv("ASTRAFLOW_MCP_EXAMPLE");
  ASSERT_TRUE(qwen3 != nullptr && calculator != nullptr) << "run under ctest";
  Fixture f = guessGame();
  std::filesystem::copy_file(qwen3, f.dir.file("model") + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  f.options.dataset.enable_thinking = "false";
  f.options.openenv.reset_json = R"({"turns": 5})";
  McpServerOptions server;
  server.name = "calculator";
  server.command = {std::getenv("ASTRAFLOW_PYTHON"), calculator};
  server.timeout_seconds = 60;
  f.options.mcp_servers = {server};
  auto env = makeEnvironment(f.options);
  const OpenEnvCounters before = sharedOpenEnvCounters();
  const std::string prompt = env->reset(0);
  EXPECT_NE(prompt.find("from 1 to 16"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("\"name\": \"add\""), std::string::npos) << prompt;  // Qwen3's template lists the tools
  StepResult s = env->step("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 5}}\n</tool_call>");
  EXPECT_FALSE(s.done);
  EXPECT_NE(s.observation.find("<tool_response>\n8.0\n</tool_response>"), std::string::npos) << s.observation;
  EXPECT_EQ(sharedOpenEnvCounters().steps - before.steps, 1U);  // the reset only: the call never reached the game
  s = env->step("8");
  EXPECT_TRUE(s.done || s.observation.find("Higher.") != std::string::npos ||
              s.observation.find("Lower.") != std::string::npos)
      << s.observation;
  EXPECT_EQ(sharedOpenEnvCounters().steps - before.steps, 2U);
}

// interface: mcp — the environment's tools (ListToolsAction) appear in the prompt, and the game is
// played by tool calls (CallToolAction) whose answers come back as tool turns. The MCP-style game
// draws its number from the seed as the text game does, so binary search finds the same numbers.
TEST(OpenEnv, McpInterfacePlaysThroughTheEnvironmentsOwnTools) {
  ToolsGame f;
  std::vector<std::unique_ptr<Environment>> envs;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t k = 0; k < 6; ++k) {
    envs.push_back(makeEnvironment(f.options));
    seeds.push_back(envs.back()->trainingId(k));
  }
  const std::size_t n = envs.size();
  std::vector<int> low(n, 1), high(n, 16), found(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string prompt = envs[i]->reset(seeds[i]);
    EXPECT_NE(prompt.find("Find it with the guess tool"), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("\"name\": \"guess\""), std::string::npos) << prompt;  // the tools, by the template
    EXPECT_NE(prompt.find("\"name\": \"guesses_left\""), std::string::npos) << prompt;
    ASSERT_EQ(envs[i]->servedTools().size(), 2U);
  }
  // The tools are listed once per process: the other episodes' sessions only reset.
  const OpenEnvCounters after_resets = sharedOpenEnvCounters();
  auto another = makeEnvironment(f.options);
  EXPECT_NE(another->reset(99).find("\"name\": \"guess\""), std::string::npos);
  EXPECT_EQ(sharedOpenEnvCounters().steps - after_resets.steps, 1U);
  for (int turn = 0; turn < 5; ++turn) {  // every episode one turn in turn: sessions must not mix
    for (std::size_t i = 0; i < n; ++i) {
      if (found[i] != 0) continue;
      const int guess = (low[i] + high[i]) / 2;
      const StepResult s = envs[i]->step(guessCall(guess));
      if (s.done) {
        EXPECT_EQ(s.reason, "correct");
        EXPECT_EQ(s.reward, 1.0);
        found[i] = guess;
        continue;
      }
      EXPECT_NE(s.observation.find("<tool_response>"), std::string::npos) << s.observation;  // a tool turn
      if (s.observation.find("higher") != std::string::npos) {
        low[i] = guess + 1;
      } else {
        EXPECT_NE(s.observation.find("lower"), std::string::npos) << s.observation;
        high[i] = guess - 1;
      }
    }
  }
  // The text game (openenv_guess) with the same seeds: the same numbers.
  Fixture text = guessGame();
  text.options.openenv.reset_json = R"({"turns": 5})";
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::unique_ptr<Environment>> one;
    one.push_back(makeEnvironment(text.options));
    EXPECT_EQ(playAll(one, {seeds[i]}), std::vector<int>{found[i]}) << "seed " << seeds[i];
  }
}

// What the policy gets wrong is answered, not fatal: a malformed call is answered "error: …"
// without reaching the server, an unknown tool or a bad argument by the server's error, and a
// turn without a tool call is the policy's answer, which ends the episode with the rewards so far.
TEST(OpenEnv, McpInterfaceAnswersBadCallsAndEndsAtATurnWithoutOne) {
  ToolsGame f;
  auto env = makeEnvironment(f.options);
  env->reset(7);
  const OpenEnvCounters before = sharedOpenEnvCounters();
  StepResult s = env->step("<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": 3}\n</tool_call>");
  EXPECT_FALSE(s.done);
  EXPECT_NE(s.observation.find("error: "), std::string::npos) << s.observation;
  EXPECT_EQ(sharedOpenEnvCounters().steps, before.steps);  // never sent
  s = env->step("<tool_call>\n{\"name\": \"peek\", \"arguments\": {}}\n</tool_call>");
  EXPECT_FALSE(s.done);
  EXPECT_NE(s.observation.find("error: Unknown tool"), std::string::npos) << s.observation;
  s = env->step("<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": \"three\"}}\n</tool_call>");
  EXPECT_FALSE(s.done);
  EXPECT_NE(s.observation.find("error: "), std::string::npos) << s.observation;
  s = env->step("<tool_call>\n{\"name\": \"guesses_left\", \"arguments\": {}}\n</tool_call>");
  EXPECT_NE(s.observation.find("<tool_response>\n5\n</tool_response>"), std::string::npos) << s.observation;
  EXPECT_EQ(sharedOpenEnvCounters().steps - before.steps, 3U);
  EXPECT_EQ(sharedOpenEnvCounters().errors, before.errors);  // tool errors are answers, not failures
  s = env->step("I think it is 9.");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reward, 0.0);
  EXPECT_EQ(s.reason, "wrong");

  // A server that is not MCP-style refuses ListToolsAction: the episode ends env_error, counted.
  Fixture plain = guessGame();
  plain.options.openenv.interface = OpenEnvInterface::Mcp;
  auto wrong = makeEnvironment(plain.options);
  const OpenEnvCounters at = sharedOpenEnvCounters();
  wrong->reset(1);
  s = wrong->step(guessCall(8));
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reason, "env_error");
  EXPECT_EQ(sharedOpenEnvCounters().errors - at.errors, 1U);
}

TEST(OpenEnv, ConfigKeys) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "ASTRAFLOW_CLI is not set";
  test::TempDir dir;
  ASSERT_EQ(std::system((std::string(cli) + " init-model " + dir.file("m") +
                         " --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 --intermediate-size 32 "
                         "--max-positions 64 > /dev/null")
                            .c_str()),
            0);
  const std::string head = "run: {output_dir: " + dir.file("run") +
                           "}\npolicies: [{name: p, model: {hf: " + dir.file("m") +
                           "}}]\nlayout: [{role: dataflow, ranks: 1}, {role: trainer, policy: p, ranks: 1}, "
                           "{role: rollout, policies: [p], ranks: 1}]\n";
  Config c = parseConfig(head + R"(environment:
  name: openenv
  max_turns: 6
  system_prompt: Play well.
  openenv:
    command: [python3, server.py, --port, "{port}"]
    env: {LEVEL: hard}
    reset: {high: 32, task: "007", hard: true, ratio: 0.5, tags: [a, 1]}
    action_field: text
    observation_field: prompt
    observation_role: tool
    seed_field: task_seed
    eval_seed_start: 5000
    reward: last
    timeout_seconds: 3
    max_context_tokens: 400
    observation_bytes: 1000
    stop: ["</guess>"]
    demonstrations: demos/guess.jsonl
)",
                         "t.yaml");
  const OpenEnvOptions& o = c.environment.openenv;
  EXPECT_EQ(o.command, (std::vector<std::string>{"python3", "server.py", "--port", "{port}"}));
  EXPECT_EQ(o.env, (std::vector<std::pair<std::string, std::string>>{{"LEVEL", "hard"}}));
  // YAML scalars keep their types; a quoted one stays a string.
  EXPECT_EQ(json::parse(o.reset_json), json::parse(R"({"high": 32, "task": "007", "hard": true, "ratio": 0.5,
                                                       "tags": ["a", 1]})"));
  EXPECT_EQ(o.action_field, "text");
  EXPECT_EQ(o.interface, OpenEnvInterface::Text);
  EXPECT_EQ(o.observation_role, ObservationRole::Tool);
  EXPECT_EQ(o.seed_field, "task_seed");
  EXPECT_EQ(o.eval_seed_start, 5000U);
  EXPECT_EQ(o.reward, OpenEnvReward::Last);
  EXPECT_EQ(o.max_context_tokens, 400);
  EXPECT_EQ(o.stop, std::vector<std::string>{"</guess>"});
  EXPECT_EQ(o.demonstrations, (std::filesystem::current_path() / "demos/guess.jsonl").string());  // made absolute
  EXPECT_EQ(o.log_dir, dir.file("run") + "/openenv");
  EXPECT_EQ(c.environment.max_turns, 6);
  EXPECT_EQ(c.environment.dataset.system_prompt, "Play well.");
  EXPECT_EQ(c.environment.dataset.tokenizer_folders, std::vector<std::string>{dir.file("m")});

  auto refused = [&](const std::string& text, const std::string& says) {
    try {
      parseConfig(head + text, "t.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("environment: {name: openenv}", "environment.openenv");
  refused("environment: {name: openenv, openenv: {}}", "give one of url");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', command: [a, '{port}']}}", "give one of url");
  refused("environment: {name: openenv, openenv: {url: 'ws://h:1'}}", "environment.openenv.url");
  refused("environment: {name: openenv, openenv: {command: [python3, s.py]}}", "has no {port} argument");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', reward: mean}}", "allowed: sum|last");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', observation_role: system}}", "allowed: user|tool");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', reset: [1]}}", "environment.openenv.reset");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', interface: rpc}}", "allowed: text|mcp");
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', interface: mcp, action_field: m}}",
          "belongs to interface: text");
  EXPECT_EQ(parseConfig(head + "environment: {name: openenv, openenv: {url: 'http://h:1', interface: mcp}}", "t.yaml")
                .environment.openenv.interface,
            OpenEnvInterface::Mcp);
  refused("environment: {name: openenv, openenv: {url: 'http://h:1', colour: red}}", "environment.openenv.colour");
  refused("environment: {name: openenv, train: [a.jsonl], openenv: {url: 'http://h:1'}}", "environment.train");
  refused("environment: {name: arithmetic, openenv: {url: 'http://h:1'}}", "environment.openenv");
  c = parseConfig(head +
                      "environment: {name: openenv, openenv: {url: 'http://h:1'}, tools: {mcp: [{name: calc, "
                      "command: [python3, calc.py]}]}}",
                  "t.yaml");
  ASSERT_EQ(c.environment.mcp_servers.size(), 1U);
  EXPECT_EQ(c.environment.mcp_servers[0].name, "calc");
}

}  // namespace openenv_tests
