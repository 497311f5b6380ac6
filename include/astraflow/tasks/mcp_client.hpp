#pragma once
// A Model Context Protocol client (docs/tasks.md, "Tools from MCP servers"): the server is a
// program the rank starts, speaking JSON-RPC 2.0 one message per line on its stdin and stdout
// (the stdio transport), or a running server at a URL each message is POSTed to (the streamable
// HTTP transport). At start: `initialize`, `notifications/initialized`,
// `tools/list` (every page); then `tools/call` per call. The server is started again when it has
// ended (a crash, a timeout); its tools must then be the ones it listed first.
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/environment_options.hpp"

namespace astraflow {

struct McpTool {
  std::string name;
  std::string description;
  nlohmann::ordered_json input_schema;  // JSON Schema of the arguments (an object schema)
  // As chat templates take tools: {"type": "function", "function": {name, description, parameters}}.
  nlohmann::ordered_json functionSchema() const;
};

struct McpCounters {
  std::uint64_t calls = 0;
  std::uint64_t errors = 0;     // calls answered "error: …" (the tool's own, bad arguments, server failures)
  std::uint64_t timeouts = 0;   // calls past timeout_seconds (the server killed)
  std::uint64_t restarts = 0;   // servers started again after they ended or were killed
  std::uint64_t malformed = 0;  // lines from the server that were not JSON-RPC messages (skipped)
};

class McpClient {
 public:
  // Starts the server and lists its tools. Throws Error naming the server (options.name) when it
  // cannot be started, does not answer `initialize` or `tools/list` within the timeout, or lists
  // no tools.
  explicit McpClient(McpServerOptions options);
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  const std::vector<McpTool>& tools() const { return tools_; }
  // The text the policy sees: the result's text content joined by newlines (other content types
  // named and skipped). Every failure is a reply starting "error: " (an unknown tool, missing
  // required arguments, the tool's own error, a timeout, the server ending); never throws for
  // what the server does. Safe from several threads (calls take turns).
  std::string call(const std::string& tool, const nlohmann::ordered_json& arguments);
  McpCounters counters() const;
  const McpServerOptions& options() const { return options_; }

 private:
  struct Session;
  void start();  // a fresh process, initialised; throws Error
  nlohmann::ordered_json request(const std::string& method, nlohmann::ordered_json params, std::string& error);

  std::string stderrNote() const;  // "; its stderr ends: …" of the last server that failed, or ""
  std::string where() const;       // its command line or its URL, for errors

  McpServerOptions options_;
  std::string last_stderr_;
  std::vector<McpTool> tools_;
  std::unique_ptr<Session> session_;
  std::int64_t next_id_ = 1;
  mutable std::mutex mutex_;
  McpCounters counters_;
};

// A tools/call result as the policy sees it: its text content items joined, other content named
// and skipped ("[image content skipped]"), else its structured content as JSON. Reads the MCP
// wire form (isError, structuredContent) and the snake_case form OpenEnv's CallToolObservation
// serialises (is_error, structured_content).
struct McpResultText {
  std::string text;
  bool is_error = false;
};
McpResultText mcpResultText(const nlohmann::ordered_json& result);

// The process's client for this server (episodes are made per task; the server stays).
std::shared_ptr<McpClient> sharedMcpClient(const McpServerOptions& options);
// Every shared client's counters summed (a rollout rank's report).
McpCounters sharedMcpCounters();

// A tool of a configured server and the process's client that calls it.
struct McpBoundTool {
  std::shared_ptr<McpClient> client;
  McpTool tool;
  std::string server;  // its server's name, for errors
};
// Every tool of `servers`, each server's client shared (sharedMcpClient). Two tools of one name
// are refused (std::invalid_argument naming environment.tools.mcp and both servers).
std::vector<McpBoundTool> sharedMcpTools(const std::vector<McpServerOptions>& servers);

}  // namespace astraflow
