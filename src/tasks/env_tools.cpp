// The multi-turn tool environments over JSONL prompt datasets (docs/tasks.md):
//   code_interpreter  the policy may run Python in the sandbox ("python" tool) before answering
//   doc_search        the policy may search a local corpus with BM25 ("search" tool)
// A turn with a <tool_call> (tool_call.hpp) gets the tool's reply as a "tool" message rendered
// by the policy's chat template; a turn without one is the answer, scored by environment.reward.
// The reply's tokens join the context with loss mask 0: the policy's own tokens are the only
// ones trained on.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/bm25.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/sandbox.hpp"
#include "astraflow/tasks/tool_call.hpp"
#include "tasks/builtin_environments.hpp"
#include "tasks/dataset_environment.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {

ParsedToolCall parseToolCall(std::string_view turn) {
  using json = nlohmann::ordered_json;
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ParsedToolCall out;
  const std::size_t open = turn.find(kOpen);
  if (open == std::string_view::npos) return out;
  out.present = true;
  const std::size_t body = open + kOpen.size();
  const std::size_t close = turn.find(kClose, body);
  if (close == std::string_view::npos) {
    out.error = "the <tool_call> is not closed by </tool_call>";
    return out;
  }
  const json j = json::parse(turn.substr(body, close - body), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "the tool call is not a JSON object";
    return out;
  }
  if (!j.contains("name") || !j["name"].is_string()) {
    out.error = "the tool call has no \"name\" string";
    return out;
  }
  ToolCall call{j["name"].get<std::string>()};
  if (j.contains("arguments")) {
    json args = j["arguments"];
    if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, false);
    if (args.is_discarded() || !args.is_object()) {
      out.error = "the tool call's \"arguments\" is not a JSON object";
      return out;
    }
    call.arguments = std::move(args);
  }
  out.call = std::move(call);
  return out;
}

namespace {

using json = nlohmann::ordered_json;

using detail::capped;

// One tool: its name, the schema the chat template shows the policy, and what a call does.
class Tool {
 public:
  virtual ~Tool() = default;
  virtual std::string name() const = 0;
  virtual json schema() const = 0;  // {"type": "function", "function": {...}} as the openai API
  // The reply the policy sees; an argument error is a reply too (the policy made a mistake).
  virtual std::string call(const json& arguments) const = 0;
};

json functionSchema(const std::string& name, const std::string& description, const std::string& argument,
                    const std::string& argument_description) {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", description},
            {"parameters",
             {{"type", "object"},
              {"properties", {{argument, {{"type", "string"}, {"description", argument_description}}}}},
              {"required", json::array({argument})}}}}}};
}

class PythonTool final : public Tool {
 public:
  explicit PythonTool(const ToolOptions& o) : options_(o) {}
  std::string name() const override { return "python"; }
  json schema() const override {
    return functionSchema("python", "Runs a Python 3 program in a sandbox and returns what it printed.", "code",
                          "the program");
  }
  std::string call(const json& arguments) const override {
    if (!arguments.contains("code") || !arguments["code"].is_string()) return "error: the call needs a \"code\" string";
    SandboxRequest request;
    request.interpreter = options_.interpreter;
    request.program = arguments["code"].get<std::string>();
    request.limits.wall_seconds = options_.wall_seconds;
    request.limits.cpu_seconds = options_.wall_seconds;
    request.limits.memory_bytes = options_.memory_mb << 20;
    request.limits.output_bytes = static_cast<std::size_t>(options_.output_bytes);
    const SandboxResult r = runSandboxed(request);
    std::string reply = r.stdout_text;
    if (!r.stderr_text.empty()) reply += (reply.empty() ? "" : "\n") + std::string("[stderr]\n") + r.stderr_text;
    if (r.outcome == SandboxOutcome::Exited && r.exit_code != 0) reply += fmt::format("\n[exit code {}]", r.exit_code);
    if (r.outcome != SandboxOutcome::Exited) reply += fmt::format("\n[{}]", sandboxOutcomeName(r.outcome));
    if (reply.empty()) reply = "[no output]";
    return reply;
  }

 private:
  ToolOptions options_;
};

// One index per corpus file and process: every episode of a rank searches the same one.
std::shared_ptr<const Bm25Index> sharedIndex(const std::string& corpus) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Bm25Index>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(corpus); it != cache.end()) return it->second;
  DatasetReport report;
  auto index = std::make_shared<const Bm25Index>(Bm25Index::loadJsonl(corpus, report));
  if (report.bad > 0)
    fmt::print(stderr, "environment.tool.corpus: {} of {} lines skipped (first: {}:{}: {})\n", report.bad, report.lines,
               report.first_issues[0].file, report.first_issues[0].line, report.first_issues[0].what);
  cache.emplace(corpus, index);
  return index;
}

class SearchTool final : public Tool {
 public:
  explicit SearchTool(const ToolOptions& o) : options_(o), index_(sharedIndex(o.corpus)) {}
  std::string name() const override { return "search"; }
  json schema() const override {
    return functionSchema("search", "Searches the document collection and returns the best-matching documents.",
                          "query", "words to search for");
  }
  std::string call(const json& arguments) const override {
    if (!arguments.contains("query") || !arguments["query"].is_string())
      return "error: the call needs a \"query\" string";
    const auto hits = index_->search(arguments["query"].get<std::string>(), static_cast<std::size_t>(options_.top_k));
    if (hits.empty()) return "no documents match";
    std::string reply;
    for (std::size_t i = 0; i < hits.size(); ++i) {
      const CorpusDocument& d = index_->document(hits[i].document);
      reply += fmt::format("{}[{}] {}\n{}", i ? "\n\n" : "", i + 1, d.title.empty() ? d.id : d.title,
                           capped(d.text, options_.document_bytes));
    }
    return reply;
  }

 private:
  ToolOptions options_;
  std::shared_ptr<const Bm25Index> index_;
};

// A tool of an MCP server (mcp_client.hpp): its own schema, called through the rank's client.
class McpServerTool final : public Tool {
 public:
  McpServerTool(std::shared_ptr<McpClient> client, McpTool tool) : client_(std::move(client)), tool_(std::move(tool)) {}
  std::string name() const override { return tool_.name; }
  json schema() const override { return tool_.functionSchema(); }
  std::string call(const json& arguments) const override { return client_->call(tool_.name, arguments); }

 private:
  std::shared_ptr<McpClient> client_;
  McpTool tool_;
};

// The built-in tool (when there is one) and every tool of the configured MCP servers; two tools
// of one name are refused, naming both owners.
std::vector<std::unique_ptr<Tool>> toolsOf(const EnvironmentOptions& options, std::unique_ptr<Tool> builtin) {
  std::vector<std::unique_ptr<Tool>> tools;
  std::map<std::string, std::string> owner;
  if (builtin) {
    owner[builtin->name()] = "the " + options.name + " environment";
    tools.push_back(std::move(builtin));
  }
  for (McpBoundTool& t : sharedMcpTools(options.mcp_servers)) {
    const auto [it, fresh] = owner.emplace(t.tool.name, "MCP server '" + t.server + "'");
    if (!fresh)
      throw std::invalid_argument(
          fmt::format("environment.tools.mcp: the tool \"{}\" of MCP server '{}' has the "
                      "name of a tool of {}",
                      t.tool.name, t.server, it->second));
    tools.push_back(std::make_unique<McpServerTool>(std::move(t.client), std::move(t.tool)));
  }
  return tools;
}

class ToolEnvironment final : public detail::DatasetEnvironmentBase {
 public:
  // The tools are made at the first reset, not here: the dataflow rank makes environments for their
  // problem ids only, and must not start MCP servers or load a corpus for that.
  using MakeTools = std::function<std::vector<std::unique_ptr<Tool>>()>;
  ToolEnvironment(const EnvironmentOptions& options, MakeTools make_tools, std::string name)
      : DatasetEnvironmentBase(options), make_tools_(std::move(make_tools)), name_(std::move(name)) {
    replyTurn("");  // a template that cannot continue a conversation with a tool reply fails here, at the start
  }

  std::string name() const override { return name_; }
  int maxTurns() const override { return options_.max_turns; }
  int maxContextTokens() const override { return options_.tool.max_context_tokens; }

  std::string reset(std::uint64_t problem_id) override {
    if (make_tools_) {
      tools_ = make_tools_();
      make_tools_ = nullptr;
      for (const auto& t : tools_) schemas_.push_back(t->schema());
    }
    turns_ = 0;
    prompt_ = task_->chat.render(startMessages(problem_id), withTools(chatOptions(true)));
    return prompt_;
  }

  StepResult step(std::string_view action) override {
    row();  // throws before reset()
    ++turns_;
    const ParsedToolCall parsed = parseToolCall(action);
    // The answer: a turn without a tool call, or the last turn whatever it holds.
    if (!parsed.present || turns_ >= options_.max_turns) {
      const RewardResult r = score(action);
      return {"", r.reward, rewardReasonName(r.reason), true};
    }
    std::string reply;
    const Tool* tool = nullptr;
    for (const auto& t : tools_)
      if (parsed.call && t->name() == parsed.call->name) tool = t.get();
    if (!parsed.call)
      reply = "error: " + parsed.error;
    else if (tool == nullptr)
      reply = fmt::format("error: there is no tool \"{}\"; {}", parsed.call->name, toolNames());
    else
      reply = tool->call(parsed.call->arguments);
    return {replyTurn(capped(std::move(reply), options_.tool.output_bytes)), 0.0, "", false};
  }

 private:
  ChatOptions withTools(ChatOptions o) const {
    o.tools = schemas_;
    return o;
  }

  std::string toolNames() const {
    std::vector<std::string> names;
    for (const auto& t : tools_) names.push_back(fmt::format("\"{}\"", t->name()));
    return names.size() == 1 ? "the tool is " + names[0] : fmt::format("the tools are {}", fmt::join(names, ", "));
  }

  std::string replyTurn(std::string reply) const {
    return task_->chat.continuation({{"role", "tool"}, {"content", std::move(reply)}}, withTools(chatOptions(true)));
  }

  MakeTools make_tools_;
  std::vector<std::unique_ptr<Tool>> tools_;
  json schemas_ = json::array();
  std::string name_;
  int turns_ = 0;
};

}  // namespace

namespace detail {

std::unique_ptr<Environment> makeCodeInterpreterEnvironment(const EnvironmentOptions& options) {
  return std::make_unique<ToolEnvironment>(
      options, [options] { return toolsOf(options, std::make_unique<PythonTool>(options.tool)); }, "code_interpreter");
}

std::unique_ptr<Environment> makeDocSearchEnvironment(const EnvironmentOptions& options) {
  if (options.tool.corpus.empty()) throw std::invalid_argument("environment.tool.corpus: doc_search needs a corpus");
  return std::make_unique<ToolEnvironment>(
      options, [options] { return toolsOf(options, std::make_unique<SearchTool>(options.tool)); }, "doc_search");
}

std::unique_ptr<Environment> makeDatasetToolEnvironment(const EnvironmentOptions& options) {
  return std::make_unique<ToolEnvironment>(
      options, [options] { return toolsOf(options, nullptr); }, "dataset");
}

}  // namespace detail
}  // namespace astraflow
