// The multi-turn tool environments (code_interpreter, doc_search): tool calls parsed from a turn,
// the tool's reply appended through the chat template so that the context equals the template's
// rendering of the whole conversation (init-model's ChatML and Qwen3's own template), the sandbox
// running the policy's code, BM25 search over a JSONL corpus, the last turn scored, and the
// config keys that set them up.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/bm25.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/tool_call.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;
using json = nlohmann::ordered_json;

namespace {

struct ToolFixture {
  test::TempDir dir;
  EnvironmentOptions options;

  explicit ToolFixture(const std::string& name) {
    std::filesystem::create_directories(dir.file("model"));
    writeByteLevelTokenizer(dir.file("model"));
    std::ofstream train(dir.file("train.jsonl"));
    train << R"({"prompt": "What is 6 times 7?", "answer": "42"})"
          << "\n";
    train << R"({"prompt": "Which river flows through Lyon?", "answer": "Rhone"})"
          << "\n";
    std::ofstream corpus(dir.file("corpus.jsonl"));
    corpus << R"({"id": "d1", "title": "Lyon", "text": "Lyon lies where the Rhone meets the Saone."})"
           << "\n";
    corpus << R"({"id": 2, "title": "Paris", "text": "Paris lies on the Seine."})"
           << "\n";
    corpus << "broken line\n";
    corpus << R"({"title": "Bordeaux", "text": "Bordeaux lies on the Garonne, a river."})"
           << "\n";
    options.name = name;
    options.max_turns = 3;
    options.dataset.train_files = {dir.file("train.jsonl")};
    options.dataset.tokenizer_folders = {dir.file("model")};
    options.dataset.system_prompt = "Use the tool, then answer with \\boxed{}.";
    options.tool.corpus = dir.file("corpus.jsonl");
    options.tool.wall_seconds = 5;
  }
};

std::string call(const std::string& name, const json& arguments) {
  return "<tool_call>\n" + json{{"name", name}, {"arguments", arguments}}.dump() + "\n</tool_call>";
}

// Runs `turns` through a fresh episode of training row `row`; returns the context text (turns
// joined by the eos token, as the tokens would hold them) and the last step's result.
std::pair<std::string, StepResult> play(Environment& env, std::uint64_t row, const std::vector<std::string>& turns,
                                        const std::string& eos = "<|im_end|>") {
  std::string context = env.reset(row);
  StepResult r;
  for (const auto& t : turns) {
    context += t + eos;
    r = env.step(t);
    if (r.done) break;
    context += r.observation;
  }
  return {context, r};
}

}  // namespace

TEST(ToolCall, ParsesTheFirstCall) {
  EXPECT_FALSE(parseToolCall("The answer is \\boxed{4}.").present);
  auto p =
      parseToolCall(R"j(Let me run it. <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>)j");
  ASSERT_TRUE(p.call);
  EXPECT_EQ(p.call->name, "python");
  EXPECT_EQ(p.call->arguments["code"], "print(1)");
  p = parseToolCall(R"(<tool_call>{"name": "search", "arguments": "{\"query\": \"x\"}"}</tool_call>)");
  ASSERT_TRUE(p.call);  // arguments as a JSON string, as OpenAI-style APIs send them
  EXPECT_EQ(p.call->arguments["query"], "x");
  p = parseToolCall(R"(<tool_call>{"name": "search"}</tool_call>)");
  ASSERT_TRUE(p.call);
  EXPECT_TRUE(p.call->arguments.empty());
  for (const char* bad :
       {R"(<tool_call>{"name": "python")", R"j(<tool_call>print(1)</tool_call>)j",
        R"(<tool_call>{"arguments": {}}</tool_call>)", R"(<tool_call>{"name": "python", "arguments": [1]}</tool_call>)",
        R"(<tool_call>{"name": 3}</tool_call>)"}) {
    p = parseToolCall(bad);
    EXPECT_TRUE(p.present) << bad;
    EXPECT_FALSE(p.call) << bad;
    EXPECT_FALSE(p.error.empty()) << bad;
  }
}

TEST(CodeInterpreter, RunsTheCodeAndScoresTheAnswer) {
  ToolFixture f("code_interpreter");
  auto env = makeEnvironment(f.options);
  EXPECT_EQ(env->maxTurns(), 3);
  const std::uint64_t row = 0;  // "6 times 7" is the first training row in file order
  const std::string first = env->reset(row);
  ASSERT_NE(first.find("6 times 7"), std::string::npos) << first;
  const std::vector<std::string> turns = {call("python", {{"code", "print(6 * 7)"}}), "So it is \\boxed{42}."};
  auto [context, r] = play(*env, row, turns);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, "correct");
  // The context is the ChatML rendering of the whole conversation, the tool's output in it.
  const ChatTemplate chat = ChatTemplate::load(f.dir.file("model"));
  json messages = json::array({{{"role", "system"}, {"content", f.options.dataset.system_prompt}},
                               {{"role", "user"}, {"content", "What is 6 times 7?"}},
                               {{"role", "assistant"}, {"content", turns[0]}},
                               {{"role", "tool"}, {"content", "42\n"}},
                               {{"role", "assistant"}, {"content", turns[1]}}});
  EXPECT_EQ(context + "\n", chat.render(messages));  // the template ends the last turn with a newline

  // The program's error is the reply; the episode goes on.
  env->reset(row);
  StepResult s = env->step(call("python", {{"code", "raise ValueError('boom')"}}));
  EXPECT_FALSE(s.done);
  EXPECT_NE(s.observation.find("ValueError: boom"), std::string::npos) << s.observation;
  EXPECT_NE(s.observation.find("[exit code 1]"), std::string::npos) << s.observation;
  s = env->step(call("shell", {{"code", "ls"}}));
  EXPECT_NE(s.observation.find("there is no tool \"shell\""), std::string::npos) << s.observation;
  // The last turn is the answer whatever it holds: a tool call there is graded as text (its last
  // number, 1, is not the answer).
  s = env->step(call("python", {{"code", "print(1)"}}));
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reward, 0.0);
  EXPECT_EQ(s.reason, "wrong");
}

TEST(CodeInterpreter, LongOutputIsCutAndALoopTimesOut) {
  ToolFixture f("code_interpreter");
  f.options.tool.output_bytes = 100;
  f.options.tool.wall_seconds = 0.5;
  auto env = makeEnvironment(f.options);
  env->reset(0);
  StepResult s = env->step(call("python", {{"code", "print('x' * 5000)"}}));
  EXPECT_LT(s.observation.size(), 300u);
  EXPECT_NE(s.observation.find("more bytes cut]"), std::string::npos) << s.observation;
  s = env->step(call("python", {{"code", "while True: pass"}}));
  EXPECT_NE(s.observation.find("[timeout]"), std::string::npos) << s.observation;
}

TEST(DocSearch, SearchesTheCorpus) {
  ToolFixture f("doc_search");
  auto env = makeEnvironment(f.options);
  const std::uint64_t row = 1;
  env->reset(row);
  StepResult s = env->step(call("search", {{"query", "river Lyon"}}));
  ASSERT_FALSE(s.done);
  // Lyon's document first (both words), Bordeaux's second ("river"); Paris has neither.
  const auto lyon = s.observation.find("[1] Lyon\nLyon lies where the Rhone");
  const auto bordeaux = s.observation.find("[2] Bordeaux");
  EXPECT_NE(lyon, std::string::npos) << s.observation;
  EXPECT_NE(bordeaux, std::string::npos) << s.observation;
  EXPECT_EQ(s.observation.find("Paris"), std::string::npos) << s.observation;
  s = env->step(call("search", {{"query", "zebra"}}));
  EXPECT_NE(s.observation.find("no documents match"), std::string::npos);
  s = env->step("It is \\boxed{Rhone}.");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reward, 1.0);
}

TEST(DocSearch, CorpusLinesAreCheckedAndIdsKept) {
  ToolFixture f("doc_search");
  DatasetReport report;
  const Bm25Index index = Bm25Index::loadJsonl(f.dir.file("corpus.jsonl"), report);
  EXPECT_EQ(index.size(), 3u);
  EXPECT_EQ(report.bad, 1u);
  ASSERT_EQ(report.first_issues.size(), 1u);
  EXPECT_EQ(report.first_issues[0].line, 3u);
  EXPECT_EQ(index.document(0).id, "d1");
  EXPECT_EQ(index.document(1).id, "2");
  EXPECT_EQ(index.document(2).id, "4");  // no id: the line number
  std::ofstream(f.dir.file("empty.jsonl")) << "\n \n";
  EXPECT_THROW(Bm25Index::loadJsonl(f.dir.file("empty.jsonl"), report), Error);
  EXPECT_THROW(Bm25Index::loadJsonl(f.dir.file("absent.jsonl"), report), Error);
  EXPECT_EQ(bm25Terms("Hello, World! naïve x2"), (std::vector<std::string>{"hello", "world", "naïve", "x2"}));
}

// Qwen3's own template (tests/fixtures): tools shown in the system turn, tool replies wrapped in
// <tool_response> inside a user turn. The reply continues the policy's turn as the template
// continues an assistant turn; the turns before stay as generated (the template itself would
// drop the first turn's empty <think> block once it is no longer the last).
TEST(CodeInterpreter, ContinuesQwen3sTemplate) {
  const char* config = std::getenv("ASTRAFLOW_QWEN3_CONFIG");
  ASSERT_NE(config, nullptr) << "run under ctest (ASTRAFLOW_QWEN3_CONFIG)";
  ToolFixture f("code_interpreter");
  std::filesystem::copy_file(config, f.dir.file("model") + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  f.options.dataset.enable_thinking = "false";
  auto env = makeEnvironment(f.options);
  const std::string prompt = env->reset(0);
  const std::string turn = call("python", {{"code", "print(6 * 7)"}});
  const StepResult s = env->step(turn);
  ASSERT_FALSE(s.done);

  const ChatTemplate chat = ChatTemplate::load(f.dir.file("model"));
  ChatOptions o;
  o.extra["enable_thinking"] = false;
  o.add_generation_prompt = true;
  o.tools = json::array({{{"type", "function"},
                          {"function",
                           {{"name", "python"},
                            {"description", "Runs a Python 3 program in a sandbox and returns what it printed."},
                            {"parameters",
                             {{"type", "object"},
                              {"properties", {{"code", {{"type", "string"}, {"description", "the program"}}}}},
                              {"required", {"code"}}}}}}}});
  json messages = json::array({{{"role", "system"}, {"content", f.options.dataset.system_prompt}},
                               {{"role", "user"}, {"content", "What is 6 times 7?"}}});
  EXPECT_EQ(prompt, chat.render(messages, o));
  EXPECT_NE(prompt.find("\"name\": \"python\""), std::string::npos) << prompt;  // the tool's schema
  EXPECT_TRUE(prompt.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << prompt;
  messages.push_back({{"role", "assistant"}, {"content", turn}});
  messages.push_back({{"role", "tool"}, {"content", "42\n"}});
  const std::string whole = chat.render(messages, o);
  const std::string expected_reply =
      "\n<|im_start|>user\n<tool_response>\n42\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</"
      "think>\n\n";
  EXPECT_EQ(s.observation, expected_reply);
  EXPECT_TRUE(whole.ends_with(turn + "<|im_end|>" + expected_reply)) << whole;
  EXPECT_EQ(env->step("\\boxed{42}").reason, "correct");
}

// environment.tools.mcp: the calculator written with the `mcp` SDK (examples/mcp_calculator).
McpServerOptions calculatorServer(const std::string& name = "calculator") {
  McpServerOptions o;
  o.name = name;
  o.command = {std::getenv("ASTRAFLOW_PYTHON"), std::getenv("ASTRAFLOW_MCP_EXAMPLE")};
  o.timeout_seconds = 60;
  return o;
}

TEST(McpTools, ADatasetEpisodeCallsTheServersToolsAndItsPromptShowsTheirSchemas) {
  const char* config = std::getenv("ASTRAFLOW_QWEN3_CONFIG");
  ASSERT_NE(config, nullptr) << "run under ctest (ASTRAFLOW_QWEN3_CONFIG)";
  ASSERT_NE(std::getenv("ASTRAFLOW_MCP_EXAMPLE"), nullptr) << "run under ctest";
  ToolFixture f("dataset");
  std::filesystem::copy_file(config, f.dir.file("model") + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  f.options.dataset.enable_thinking = "false";
  f.options.mcp_servers = {calculatorServer()};
  auto env = makeEnvironment(f.options);
  EXPECT_EQ(env->maxTurns(), 3);
  const std::string prompt = env->reset(0);
  // Qwen3's template lists the tools in the system turn, as the server described them.
  for (const char* shown : {"\"name\": \"add\"", "\"name\": \"multiply\"", "\"name\": \"divide\"", "Adds two numbers.",
                            "\"required\": [\"a\", \"b\"]"})
    EXPECT_NE(prompt.find(shown), std::string::npos) << shown << " not in " << prompt;
  StepResult s = env->step(call("multiply", {{"a", 6}, {"b", 7}}));
  ASSERT_FALSE(s.done);
  EXPECT_NE(s.observation.find("<tool_response>\n42.0\n</tool_response>"), std::string::npos) << s.observation;
  s = env->step(call("python", {{"code", "print(1)"}}));
  EXPECT_NE(s.observation.find("there is no tool \"python\"; the tools are \"add\", \"multiply\", \"divide\""),
            std::string::npos)
      << s.observation;
  s = env->step("So \\boxed{42}.");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reason, "correct");

  // Beside a built-in tool: both are offered; two tools of one name are refused.
  ToolFixture code("code_interpreter");
  code.options.mcp_servers = {calculatorServer()};
  auto both = makeEnvironment(code.options);
  both->reset(0);
  EXPECT_EQ(both->step(call("add", {{"a", 1}, {"b", 2}})).observation.find("3.0") != std::string::npos, true);
  EXPECT_NE(both->step(call("python", {{"code", "print(5)"}})).observation.find("5"), std::string::npos);
  code.options.mcp_servers.push_back(calculatorServer("again"));
  try {
    makeEnvironment(code.options)->reset(0);  // the tools are made at the first episode
    FAIL() << "two tools named add were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the tool \"add\" of MCP server 'again' has the name of a tool of MCP "
                                         "server 'calculator'"),
              std::string::npos)
        << e.what();
  }
}

TEST(ToolEnvironments, ConfigKeys) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "ASTRAFLOW_CLI is not set";
  test::TempDir dir;
  ASSERT_EQ(std::system(fmt::format("{} init-model {} --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 "
                                    "--intermediate-size 32 --max-positions 64 > /dev/null",
                                    cli, dir.file("m"))
                            .c_str()),
            0);
  std::ofstream(dir.file("t.jsonl")) << R"({"prompt": "p", "answer": "1"})"
                                     << "\n";
  const std::string head = fmt::format(
      "policies: [{{name: p, model: {{hf: {}}}}}]\nlayout: [{{role: dataflow, ranks: 1}}, {{role: trainer, policy: p, "
      "ranks: 1}}, {{role: rollout, policies: [p], ranks: 1}}]\neval: {{problems: 0}}\n",
      dir.file("m"));
  const std::string env = fmt::format("environment: {{name: doc_search, train: [{}], ", dir.file("t.jsonl"));
  Config c = parseConfig(head + env + "max_turns: 5, tool: {corpus: c.jsonl, top_k: 2, output_bytes: 300}}", "t.yaml");
  EXPECT_EQ(c.environment.tool.top_k, 2);
  EXPECT_EQ(c.environment.tool.output_bytes, 300u);
  EXPECT_EQ(c.environment.max_turns, 5);
  EXPECT_TRUE(std::filesystem::path(c.environment.tool.corpus).is_absolute());
  auto refused = [&](const std::string& text, const std::string& key) {
    try {
      parseConfig(head + text, "t.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  refused(env + "tool: {top_k: 2}}", "environment.tool.corpus");
  refused(env + "tool: {corpus: c.jsonl, interpreter: /bin/sh}}", "environment.tool.interpreter");
  refused(fmt::format("environment: {{name: code_interpreter, train: [{}], tool: {{corpus: c}}}}", dir.file("t.jsonl")),
          "environment.tool.corpus");
  refused(fmt::format("environment: {{name: dataset, train: [{}], tool: {{}}}}", dir.file("t.jsonl")),
          "environment.tool");
  refused("environment: {name: arithmetic, tool: {}}", "environment.tool");

  // environment.tools.mcp
  const std::string ds = fmt::format("environment: {{name: dataset, train: [{}], ", dir.file("t.jsonl"));
  c = parseConfig(head + ds +
                      "tools: {mcp: [{name: calc, command: [python3, s.py], env: {A: '1'}, timeout_seconds: 5}, "
                      "{name: other, command: [srv]}]}}",
                  "t.yaml");
  ASSERT_EQ(c.environment.mcp_servers.size(), 2U);
  EXPECT_EQ(c.environment.mcp_servers[0].command, (std::vector<std::string>{"python3", "s.py"}));
  EXPECT_EQ(c.environment.mcp_servers[0].env, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}}));
  EXPECT_EQ(c.environment.mcp_servers[0].timeout_seconds, 5.0);
  EXPECT_EQ(c.environment.mcp_servers[1].timeout_seconds, 30.0);
  refused(ds + "tools: {mcp: [{name: a, command: [x]}, {name: a, command: [y]}]}}", "environment.tools.mcp[1].name");
  refused(ds + "tools: {mcp: [{name: a, url: 'https://x/mcp'}]}}", "environment.tools.mcp[0].url");
  refused(ds + "tools: {mcp: [{name: a, url: 'http://x/mcp', command: [x]}]}}", "give one of url");
  c = parseConfig(head + ds + "tools: {mcp: [{name: remote, url: 'http://127.0.0.1:8000/mcp'}]}}", "t.yaml");
  EXPECT_EQ(c.environment.mcp_servers.at(0).url, "http://127.0.0.1:8000/mcp");
  EXPECT_TRUE(c.environment.mcp_servers.at(0).command.empty());
  refused(ds + "tools: {mcp: [{name: a}]}}", "environment.tools.mcp[0].url: give one of url");
  refused(ds + "tools: {mcp: [{name: a, command: [x], port: 3}]}}", "environment.tools.mcp[0].port");
  refused(ds + "tools: {mcp: []}}", "environment.tools.mcp");
  refused("environment: {name: arithmetic, tools: {mcp: [{name: a, command: [x]}]}}", "environment.tools");
}
