#pragma once
// How an MCP client's JSON-RPC messages reach its server (mcp_client.cpp): the stdio transport (a
// process the rank starts, one message per line on its stdin and stdout) or the streamable HTTP
// transport (each message POSTed to the server's URL; the answer is JSON or an event stream of
// messages; the session id the server gives at `initialize` is sent with every later message).
#include <memory>
#include <string>

#include "astraflow/core/environment_options.hpp"

namespace astraflow::detail {

class McpTransport {
 public:
  enum class Status {
    Ok,
    TimedOut,  // no answer within the time: the transport must not be used again
    TooLong,   // a message past the limit: must not be used again
    Ended,     // the server is gone (its process ended, the connection or the session failed)
  };
  virtual ~McpTransport() = default;
  // Sends one message (a request, a notification or a response to the server's request).
  virtual Status send(const std::string& message, double seconds) = 0;
  // The next message the server sent, as text (the caller parses it).
  virtual Status next(std::string& message, double seconds) = 0;
  // Whether the server has ended between messages (a process that exited); never for HTTP.
  virtual bool ended() = 0;
  // What the server said on stderr lately, or what the last failed HTTP exchange was, for errors.
  virtual std::string diagnostics() = 0;
};

// Starts options.command (stdio) or connects to options.url (streamable HTTP). Throws Error when
// the program cannot be started or the URL is not http://host:port/path.
std::unique_ptr<McpTransport> openMcpTransport(const McpServerOptions& options, std::size_t max_message_bytes);

}  // namespace astraflow::detail
