// The `openenv` environment (docs/tasks.md, "OpenEnv environments"): one episode is one session
// on an OpenEnv server's WebSocket /ws — {"type": "reset", "data": {seed, ...}} at the start,
// {"type": "step", "data": {<action_field>: the policy's turn}} per turn, each answered
// {"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}. Observations
// are rendered by the policy's chat template as user (or tool) turns with loss mask 0, as the
// built-in multi-turn environments' replies are. Whatever goes wrong with the server ends the
// episode with reward 0 and reason `env_error` or `timeout`, counted; it never throws.
// With `interface: mcp` the server is an MCPEnvironment: its tools are listed once
// ({"type": "list_tools"} as a step) and shown to the policy by its chat template, each turn's
// tool call is sent as {"type": "call_tool", "tool_name", "arguments"} and answered as a tool
// turn, and a turn without a tool call is the episode's end.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "astraflow/http/websocket.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/tool_call.hpp"
#include "astraflow/text/chat_template.hpp"
#include "tasks/builtin_environments.hpp"
#include "tasks/openenv_demonstrations.hpp"
#include "tasks/openenv_server.hpp"
#include "tasks/process_registry.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

using json = nlohmann::ordered_json;
using std::chrono::milliseconds;

// An OpenEnv message is small; an observation past this is a broken server, not a big answer.
constexpr std::size_t kMaxMessageBytes = std::size_t{16} << 20;

std::shared_ptr<const ChatTemplate> sharedChat(const std::string& folder) {
  static detail::ProcessRegistry<std::string, const ChatTemplate> chats;
  return chats.get(folder, [&] { return std::make_shared<const ChatTemplate>(ChatTemplate::load(folder)); });
}

// The text of `observation` shown to the policy: the configured field, else the first string
// field (named once in the log), else the whole object as JSON.
std::string observationText(const json& observation, const std::string& field) {
  if (!field.empty()) {
    const auto it = observation.find(field);
    if (it == observation.end()) return fmt::format("[the observation has no field \"{}\"]", field);
    return it->is_string() ? it->get<std::string>() : it->dump();
  }
  for (const auto& [name, value] : observation.items()) {
    if (!value.is_string()) continue;
    static std::once_flag logged;
    std::call_once(logged, [&, n = name] {
      spdlog::info("environment.openenv: showing the observation's field \"{}\" (set observation_field to choose)", n);
    });
    return value.get<std::string>();
  }
  return observation.dump();
}

class OpenEnvEnvironment final : public Environment {
 public:
  explicit OpenEnvEnvironment(const EnvironmentOptions& options)
      : options_(options),
        o_(options_.openenv),
        chat_(sharedChat(options.dataset.tokenizer_folders.at(0))),
        timeout_(static_cast<std::int64_t>(o_.timeout_seconds * 1000)) {
    reset_data_ = json::parse(o_.reset_json);
  }

  ~OpenEnvEnvironment() override { endSession(); }
  OpenEnvEnvironment(const OpenEnvEnvironment&) = delete;
  OpenEnvEnvironment& operator=(const OpenEnvEnvironment&) = delete;

  std::string name() const override { return "openenv"; }
  bool rendersWholeSequence() const override { return true; }
  std::vector<std::string> stopStrings() const override { return o_.stop; }
  // The server knows no solutions: the user's demonstrations of the current seed, if any.
  std::vector<std::string> referenceActions() const override {
    if (o_.demonstrations.empty() || !server_) return {};  // no game before the first reset
    const auto& actions = demonstrations().actions;
    const auto it = actions.find(seed_);
    return it == actions.end() ? std::vector<std::string>{} : it->second;
  }
  std::uint64_t referenceId(std::uint64_t k) const override {
    if (o_.demonstrations.empty()) return trainingId(k);
    const auto& seeds = demonstrations().seeds;
    return seeds[k % seeds.size()];
  }
  std::vector<McpTool> servedTools() const override { return env_tools_; }
  int maxTurns() const override { return options_.max_turns; }
  int maxContextTokens() const override { return o_.max_context_tokens; }
  std::uint64_t trainingId(std::uint64_t k) const override { return k % o_.eval_seed_start; }
  std::uint64_t heldOutId(std::uint64_t k) const override { return o_.eval_seed_start + k; }
  std::map<std::string, std::string> metadata() const override { return {{"seed", std::to_string(seed_)}}; }
  // The seed is all that is known before the server is asked: no session for a curator's look.
  std::map<std::string, std::string> metadataOf(std::uint64_t problem_id) override {
    return {{"seed", std::to_string(problem_id)}};
  }

  std::string reset(std::uint64_t problem_id) override {
    // On first use, not at construction: the dataflow rank makes environments for their ids only.
    seed_ = problem_id;
    turns_ = 0;
    total_ = last_ = 0.0;
    failure_.clear();
    endSession();
    std::optional<json> reply;
    std::string unreachable;  // why no server could be had
    if (!server_) {
      // A server that will not start fails this episode (env_error), never the rank.
      server_ = detail::sharedOpenEnvServer(o_, unreachable);
      if (server_ && !tools_made_) {
        tools_ = sharedMcpTools(options_.mcp_servers);
        for (const auto& t : tools_) schemas_.push_back(t.tool.functionSchema());
        tools_made_ = true;
      }
    }
    if (server_) {
      json data = reset_data_;
      data[o_.seed_field] = problem_id;
      reply = startEpisode(data);
      // A connection that failed because the server died is tried once more on the revived one.
      if (!reply && revived_) reply = startEpisode(data);
    } else {
      failure_ = "env_error";
    }
    std::string first =
        reply ? text(*reply)
              : fmt::format("[the environment could not be reached: {}]", unreachable.empty() ? failure_ : unreachable);
    json messages = json::array();
    if (!options_.dataset.system_prompt.empty())
      messages.push_back({{"role", "system"}, {"content", options_.dataset.system_prompt}});
    messages.push_back({{"role", "user"}, {"content", std::move(first)}});
    return chat_->render(messages, chatOptions());
  }

  StepResult step(std::string_view action) override {
    ++turns_;
    // The reset failed: the episode ends at its first turn with the failure's reason.
    if (!failure_.empty()) return {"", 0.0, failure_, true};
    if (auto reply = mcpToolReply(action)) return {*reply, 0.0, "", false};
    json step_data = {{o_.action_field, std::string(action)}};
    std::string role(enumName(kObservationRoleNames, o_.observation_role));
    if (o_.interface == OpenEnvInterface::Mcp) {
      const ParsedToolCall parsed = parseToolCall(action);
      if (!parsed.present) return ended();  // a turn without a tool call: the policy's answer
      if (!parsed.call)
        return {chat_->continuation({{"role", "tool"}, {"content", "error: " + parsed.error}}, chatOptions()), 0.0, "",
                false};
      step_data = {{"type", "call_tool"}, {"tool_name", parsed.call->name}, {"arguments", parsed.call->arguments}};
      role = "tool";
    }
    const std::optional<json> reply = exchange({{"type", "step"}, {"data", step_data}});
    if (!reply) return {"", 0.0, failure_, true};
    const json& data = (*reply)["data"];
    const double reward = data.contains("reward") && data["reward"].is_number() ? data["reward"].get<double>() : 0.0;
    total_ += reward;
    last_ = reward;
    if (data.contains("done") && data["done"].get<bool>()) return ended();  // a bool: isObservation checked it
    return {chat_->continuation({{"role", role}, {"content", text(*reply)}}, chatOptions()), 0.0, "", false};
  }

 private:
  // Read on first use: only the warm start and `env check` ask for them.
  const detail::OpenEnvDemonstrations& demonstrations() const {
    if (!demonstrations_) demonstrations_ = detail::sharedDemonstrations(o_.demonstrations, o_.eval_seed_start);
    return *demonstrations_;
  }

  // The episode's end: its reward is the step rewards' sum (or the last one).
  StepResult ended() {
    endSession();
    const double r = o_.reward == OpenEnvReward::Last ? last_ : total_;
    return {"", r, r > 0 ? "correct" : "wrong", true};
  }

  // The episode's session starts with its reset; with interface: mcp the environment's tools are
  // known first (the policy's prompt shows them): listed by the process's first episode on the
  // server, remembered there for the others.
  std::optional<json> startEpisode(const json& reset_data) {
    if (o_.interface == OpenEnvInterface::Mcp && !env_tools_listed_) {
      if (const std::string known = server_->listedTools(); !known.empty()) {
        adoptEnvironmentTools(json::parse(known));
      } else {
        const std::optional<json> listed = exchange({{"type", "step"}, {"data", {{"type", "list_tools"}}}});
        if (!listed) return std::nullopt;
        if (!adoptEnvironmentTools((*listed)["data"]["observation"])) return std::nullopt;
        server_->rememberTools((*listed)["data"]["observation"].dump());
      }
    }
    return exchange({{"type", "reset"}, {"data", reset_data}});
  }

  // A ListToolsObservation's {"tools": [{name, description, input_schema}]} into the chat
  // template's tools, after environment.tools.mcp's (whose calls are answered first). false, the
  // episode failed (env_error, counted malformed), when it is not a list of named tools.
  bool adoptEnvironmentTools(const json& observation) {
    const json tools = observation.contains("tools") ? observation["tools"] : json();
    bool ok = tools.is_array() && !tools.empty();
    for (const auto& t : ok ? tools : json::array())
      ok = ok && t.is_object() && t.contains("name") && t["name"].is_string();
    if (!ok) {
      ++server_->counters().malformed;
      ++server_->counters().errors;
      failure_ = "env_error";
      spdlog::warn("environment.openenv: interface: mcp, but the server's list_tools answer holds no tools: {}",
                   detail::capped(observation.dump(), 300));
      return false;
    }
    for (const auto& t : tools) {
      env_tools_.push_back(
          {t["name"].get<std::string>(),
           t.contains("description") && t["description"].is_string() ? t["description"].get<std::string>() : "",
           t.contains("input_schema") && t["input_schema"].is_object() ? t["input_schema"] : json::object()});
      schemas_.push_back(env_tools_.back().functionSchema());
    }
    env_tools_listed_ = true;
    return true;
  }
  // Ends the episode's session as the protocol does ({"type": "close"}, then the server closes).
  void endSession() {
    if (session_) session_->finish(R"({"type":"close"})", std::chrono::milliseconds(1000));
    session_.reset();
  }

  // A well-formed call of an environment.tools.mcp tool is answered by its server as a tool turn,
  // without a step of the OpenEnv environment; any other turn (another tool's call included: it
  // may be the environment's own) is the environment's.
  std::optional<std::string> mcpToolReply(std::string_view action) {
    if (tools_.empty()) return std::nullopt;
    const ParsedToolCall parsed = parseToolCall(action);
    if (!parsed.call) return std::nullopt;
    for (const auto& t : tools_) {
      if (t.tool.name != parsed.call->name) continue;
      std::string reply =
          detail::capped(t.client->call(t.tool.name, parsed.call->arguments), options_.tool.output_bytes);
      return chat_->continuation({{"role", "tool"}, {"content", std::move(reply)}}, chatOptions());
    }
    return std::nullopt;
  }

  ChatOptions chatOptions() const {
    ChatOptions c;
    c.add_generation_prompt = true;
    if (!schemas_.empty()) c.tools = schemas_;
    if (!options_.dataset.enable_thinking.empty())
      c.extra["enable_thinking"] = options_.dataset.enable_thinking == "true";
    return c;
  }

  // What the policy is shown of a reply: a CallToolObservation's result (its content text, or
  // "error: …" for its error or a failed tool), else the observation's field.
  std::string text(const json& reply) const {
    const json& observation = reply["data"]["observation"];
    if (o_.interface == OpenEnvInterface::Mcp && observation.contains("tool_name")) {
      std::string shown;
      if (observation.contains("error") && observation["error"].is_object()) {
        const json& e = observation["error"];
        shown = "error: " +
                (e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump());
      } else {
        auto [result, is_error] = mcpResultText(observation.value("result", json()));
        shown = is_error ? "error: " + result : result.empty() ? "[no output]" : result;
      }
      return detail::capped(shown, o_.observation_bytes);
    }
    return detail::capped(observationText(observation, o_.observation_field), o_.observation_bytes);
  }

  // A reply's "type" when it is an object with a string one, else "" (a server's JSON is not trusted:
  // nothing here may throw on a wrong type).
  static std::string messageType(const json& reply) {
    if (!reply.is_object() || !reply.contains("type") || !reply["type"].is_string()) return "";
    return reply["type"].get<std::string>();
  }
  // {"observation": {...}, "reward": number|null (or absent), "done": bool (or absent)}.
  static bool isObservation(const json& data) {
    if (!data.is_object() || !data.contains("observation") || !data["observation"].is_object()) return false;
    if (data.contains("reward") && !data["reward"].is_number() && !data["reward"].is_null()) return false;
    return !data.contains("done") || data["done"].is_boolean();
  }

  // Sends `message` on the episode's session (opened on first use) and reads the reply. nullopt
  // when it failed: failure_ says why (`timeout`, `env_error`), the session is dropped, a dead
  // server of this rank started again (revived_).
  std::optional<json> exchange(const json& message) {
    auto& c = server_->counters();
    revived_ = false;
    std::string what;
    bool dropped = false;  // the connection failed (not a timeout): the server may have died
    try {
      if (!session_) {
        const auto endpoint = server_->sessionEndpoint();
        generation_ = endpoint.generation;
        session_ = std::make_unique<WebSocketClient>(endpoint.url, timeout_, kMaxMessageBytes);
        ++c.sessions;
      }
      session_->send(message.dump(), timeout_);
      const json reply = json::parse(session_->receive(timeout_), nullptr, false);
      const std::string type = messageType(reply);
      if (type == "observation" && isObservation(reply["data"])) {
        ++c.steps;
        failure_.clear();
        return reply;
      }
      if (type == "error") {
        what = "the server answered an error: " + reply.value("data", json::object()).dump();
      } else {
        ++c.malformed;
        what = "the server's reply is not an OpenEnv observation message";
      }
      failure_ = "env_error";
    } catch (const WebSocketError& e) {
      what = e.what();
      failure_ = e.timedOut() ? "timeout" : "env_error";
      if (e.timedOut()) ++c.timeouts;
      dropped = !e.timedOut();
    }
    ++c.errors;
    session_.reset();
    if (c.errors.load() <= 5 || c.errors.load() % 100 == 0)
      spdlog::warn("environment.openenv: episode seed {}: {} ({} failures so far)", seed_, what, c.errors.load());
    revived_ = server_->reviveIfDead(generation_, std::chrono::milliseconds(dropped ? 1000 : 0));
    return std::nullopt;
  }

  EnvironmentOptions options_;
  const OpenEnvOptions& o_;
  std::shared_ptr<detail::OpenEnvServer> server_;
  bool tools_made_ = false;
  std::shared_ptr<const ChatTemplate> chat_;
  milliseconds timeout_;
  json reset_data_;
  std::vector<McpBoundTool> tools_;  // environment.tools.mcp
  json schemas_ = json::array();     // environment.tools.mcp's, then (interface: mcp) the environment's
  bool env_tools_listed_ = false;
  std::vector<McpTool> env_tools_;  // interface: mcp, the server's own
  std::unique_ptr<WebSocketClient> session_;
  int generation_ = 0;  // the server start session_ was opened on
  std::uint64_t seed_ = 0;
  mutable std::shared_ptr<const detail::OpenEnvDemonstrations> demonstrations_;
  int turns_ = 0;
  double total_ = 0.0, last_ = 0.0;
  std::string failure_;
  bool revived_ = false;
};

}  // namespace

namespace detail {

std::unique_ptr<Environment> makeOpenEnvEnvironment(const EnvironmentOptions& options) {
  if (options.dataset.tokenizer_folders.empty())
    throw std::invalid_argument("environment.name: openenv needs the policy's model.hf folder (its chat template)");
  return std::make_unique<OpenEnvEnvironment>(options);
}

}  // namespace detail
}  // namespace astraflow
