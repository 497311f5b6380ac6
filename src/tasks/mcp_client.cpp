// McpClient (include/astraflow/tasks/mcp_client.hpp): JSON-RPC 2.0 over a LineProcess.
#include "astraflow/tasks/mcp_client.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <tuple>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/process_runner.hpp"
#include "tasks/mcp_transport.hpp"
#include "tasks/process_registry.hpp"

namespace astraflow {
namespace {

using Json = nlohmann::ordered_json;

// A server's message is small; a tool's reply is cut for the policy later (tool.output_bytes).
constexpr std::size_t kMessageBytes = std::size_t{16} << 20;
// The MCP revision this client speaks; a server answering another one is taken at its word (the
// messages used here are the same in every revision since 2024-11-05).
constexpr const char* kProtocolVersion = "2025-06-18";

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A string field of an object, or "" when absent or of another type (a server's JSON is not trusted).
std::string stringField(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A boolean field, false when absent or of another type.
bool flagField(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

}  // namespace

McpResultText mcpResultText(const Json& result) {
  if (!result.is_object()) return {dump(result), false};
  std::string text;
  const Json content = result.contains("content") ? result["content"] : Json::array();
  for (const auto& item : content.is_array() ? content : Json::array()) {
    const std::string type = stringField(item, "type");
    std::string piece = type == "text" ? stringField(item, "text")
                                       : fmt::format("[{} content skipped]", type.empty() ? "unknown" : type);
    text += (text.empty() ? "" : "\n") + piece;
  }
  for (const char* key : {"structuredContent", "structured_content"})
    if (text.empty() && result.contains(key) && !result[key].is_null()) text = dump(result[key]);
  return {std::move(text), flagField(result, "isError") || flagField(result, "is_error")};
}

Json McpTool::functionSchema() const {
  return {{"type", "function"},
          {"function", {{"name", name}, {"description", description}, {"parameters", input_schema}}}};
}

struct McpClient::Session {
  std::unique_ptr<detail::McpTransport> transport;
};

McpClient::McpClient(McpServerOptions options) : options_(std::move(options)) {
  if (options_.command.empty() == options_.url.empty())
    throw Error(fmt::format("MCP server '{}' needs a command or a url", options_.name));
  start();
  // tools/list, every page
  std::string error;
  Json cursor;
  for (int page = 0; page < 1000; ++page) {
    Json params = Json::object();
    if (!cursor.is_null()) params["cursor"] = cursor;
    const Json result = request("tools/list", params, error);
    if (!error.empty())
      throw Error(
          fmt::format("MCP server '{}' ({}): tools/list failed: {}{}", options_.name, where(), error, stderrNote()));
    const Json listed = result.is_object() && result.contains("tools") ? result["tools"] : Json::array();
    for (const auto& t : listed.is_array() ? listed : Json::array()) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
      McpTool tool{t["name"].get<std::string>(), stringField(t, "description"),
                   t.contains("inputSchema") && t["inputSchema"].is_object() ? t["inputSchema"] : Json::object()};
      tools_.push_back(std::move(tool));
    }
    if (!result.is_object() || !result.contains("nextCursor") || result["nextCursor"].is_null()) break;
    cursor = result["nextCursor"];
  }
  if (tools_.empty()) throw Error(fmt::format("MCP server '{}' ({}) lists no tools", options_.name, where()));
  std::vector<std::string> names;
  for (const auto& t : tools_) names.push_back(t.name);
  spdlog::info("MCP server '{}': {} tools ({})", options_.name, tools_.size(), fmt::join(names, ", "));
}

McpClient::~McpClient() = default;

std::string McpClient::stderrNote() const {
  if (last_stderr_.empty()) return "";
  return (options_.url.empty() ? "; its stderr ends: " : "; last: ") +
         last_stderr_.substr(last_stderr_.size() > 600 ? last_stderr_.size() - 600 : 0);
}

std::string McpClient::where() const {
  return options_.url.empty() ? fmt::format("{}", fmt::join(options_.command, " ")) : options_.url;
}

McpCounters McpClient::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void McpClient::start() {
  session_ = std::make_unique<Session>();
  try {
    session_->transport = detail::openMcpTransport(options_, kMessageBytes);
  } catch (const Error& e) {
    session_.reset();
    throw Error(fmt::format("MCP server '{}': {}", options_.name, e.what()));
  }
  std::string error;
  const Json init = request("initialize",
                            {{"protocolVersion", kProtocolVersion},
                             {"capabilities", Json::object()},
                             {"clientInfo", {{"name", "astraflow"}, {"version", "1"}}}},
                            error);
  if (!error.empty()) {
    if (session_) last_stderr_ = session_->transport->diagnostics();
    session_.reset();
    throw Error(
        fmt::format("MCP server '{}' ({}) did not initialise: {}{}", options_.name, where(), error, stderrNote()));
  }
  session_->transport->send(dump({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}),
                            options_.timeout_seconds);
}

// Sends one request and reads lines until its response: notifications are skipped, a request
// from the server (it may ask for roots or sampling) is answered "method not found", a line that
// is not JSON is counted and skipped. On a timeout or an ended server the session is dropped.
Json McpClient::request(const std::string& method, Json params, std::string& error) {
  using Status = detail::McpTransport::Status;
  error.clear();
  if (!session_) {
    error = "the server is not running";
    return {};
  }
  auto& transport = *session_->transport;
  const std::int64_t id = next_id_++;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.timeout_seconds);
  auto left = [&] { return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count(); };
  auto fail = [&](Status o) {
    error = o == Status::TimedOut  ? fmt::format("no answer within {} s", options_.timeout_seconds)
            : o == Status::TooLong ? "its answer passed 16 MiB"
                                   : "the server ended";
    if (o == Status::TimedOut) ++counters_.timeouts;
    last_stderr_ = transport.diagnostics();
    session_.reset();  // a process killed with its group; started (or connected) again at the next call
    return Json();
  };
  Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) message["params"] = std::move(params);
  if (const Status sent = transport.send(dump(message), left()); sent != Status::Ok) return fail(sent);
  for (;;) {
    std::string line;
    if (const Status got = transport.next(line, left()); got != Status::Ok) return fail(got);
    const Json reply = Json::parse(line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      ++counters_.malformed;
      continue;
    }
    if (reply.contains("method")) {
      if (reply.contains("id"))
        transport.send(dump({{"jsonrpc", "2.0"},
                             {"id", reply["id"]},
                             {"error", {{"code", -32601}, {"message", "not supported by this client"}}}}),
                       left());
      continue;
    }
    if (!reply.contains("id") || reply["id"] != id) continue;  // a late answer to an earlier request
    if (reply.contains("error")) {
      const Json& e = reply["error"];
      error = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                                 : dump(e);
      return {};
    }
    return reply.value("result", Json::object());
  }
}

std::string McpClient::call(const std::string& tool, const Json& arguments) {
  std::lock_guard lock(mutex_);
  ++counters_.calls;
  auto failed = [&](std::string text) {
    ++counters_.errors;
    return "error: " + std::move(text);
  };
  const McpTool* found = nullptr;
  for (const auto& t : tools_)
    if (t.name == tool) found = &t;
  if (found == nullptr) {
    std::vector<std::string> names;
    for (const auto& t : tools_) names.push_back(t.name);
    return failed(fmt::format("there is no tool \"{}\"; the tools are {}", tool, fmt::join(names, ", ")));
  }
  if (!arguments.is_object()) return failed("the arguments are not a JSON object");
  const Json required = found->input_schema.contains("required") ? found->input_schema["required"] : Json::array();
  for (const auto& r : required.is_array() ? required : Json::array())
    if (r.is_string() && !arguments.contains(r.get<std::string>()))
      return failed(fmt::format("{} needs the argument \"{}\"", tool, r.get<std::string>()));
  if (session_ && session_->transport->ended()) session_.reset();  // it died between calls
  if (!session_) {
    try {
      start();
      ++counters_.restarts;
      spdlog::warn("MCP server '{}' started again", options_.name);
    } catch (const Error& e) {
      session_.reset();
      return failed(fmt::format("the tool server could not be started again: {}", e.what()));
    }
  }
  std::string error;
  const Json result = request("tools/call", {{"name", tool}, {"arguments", arguments}}, error);
  if (!error.empty()) return failed(error);
  auto [text, is_error] = mcpResultText(result);
  if (is_error) return failed(text.empty() ? "the tool failed" : text);
  return text.empty() ? "[no output]" : text;
}

namespace {

using ClientKey =
    std::tuple<std::string, std::vector<std::string>, std::string, std::vector<std::pair<std::string, std::string>>>;
detail::ProcessRegistry<ClientKey, McpClient>& sharedClients() {
  static detail::ProcessRegistry<ClientKey, McpClient> clients;
  return clients;
}

}  // namespace

std::shared_ptr<McpClient> sharedMcpClient(const McpServerOptions& o) {
  return sharedClients().get({o.name, o.command, o.url, o.env}, [&] { return std::make_shared<McpClient>(o); });
}

std::vector<McpBoundTool> sharedMcpTools(const std::vector<McpServerOptions>& servers) {
  std::vector<McpBoundTool> tools;
  for (const McpServerOptions& server : servers) {
    const auto client = sharedMcpClient(server);
    for (const McpTool& t : client->tools()) {
      for (const McpBoundTool& other : tools)
        if (other.tool.name == t.name)
          throw std::invalid_argument(fmt::format(
              "environment.tools.mcp: the tool \"{}\" of MCP server '{}' has the name of a tool of MCP server '{}'",
              t.name, server.name, other.server));
      tools.push_back({client, t, server.name});
    }
  }
  return tools;
}

McpCounters sharedMcpCounters() {
  McpCounters sum;
  sharedClients().forEach([&](const McpClient& client) {
    const McpCounters c = client.counters();
    sum.calls += c.calls, sum.errors += c.errors, sum.timeouts += c.timeouts;
    sum.restarts += c.restarts, sum.malformed += c.malformed;
  });
  return sum;
}

}  // namespace astraflow
