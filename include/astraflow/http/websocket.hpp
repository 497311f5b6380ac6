#pragma once
// One WebSocket connection (RFC 6455) from a client: what an OpenEnv session runs over
// (docs/tasks.md, "OpenEnv environments"). Text messages only; every operation has a deadline.
// Boost.Beast does the protocol (docs/architecture.md says why it was chosen) and stays behind
// this class, as cpp-httplib stays behind http.hpp.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "astraflow/core/error.hpp"

namespace astraflow {

// A failed connect, handshake, send or receive. `timed_out`: the deadline passed first. The
// connection is closed after any of them: a later call throws again.
class WebSocketError : public Error {
 public:
  WebSocketError(const std::string& what, bool timed_out) : Error(what), timed_out_(timed_out) {}
  bool timedOut() const { return timed_out_; }

 private:
  bool timed_out_;
};

class WebSocketClient {
 public:
  // Connects to `url` ("ws://host:port/path"; "http://" is taken as "ws://") and completes the
  // opening handshake within `timeout`. A message past `max_message_bytes` received later fails
  // the connection.
  WebSocketClient(const std::string& url, std::chrono::milliseconds timeout, std::size_t max_message_bytes);
  // Sends a close frame (best effort, a short deadline) and closes the socket.
  ~WebSocketClient();
  WebSocketClient(const WebSocketClient&) = delete;
  WebSocketClient& operator=(const WebSocketClient&) = delete;

  void send(std::string_view text, std::chrono::milliseconds timeout);
  // The next message, whole (fragments joined).
  std::string receive(std::chrono::milliseconds timeout);
  // For protocols that close with a message of their own (OpenEnv's {"type": "close"}): sends
  // `last`, then waits for the peer's close frame and answers it, so neither side sees the other
  // vanish mid-message. Never throws; the connection is closed after it.
  void finish(std::string_view last, std::chrono::milliseconds timeout) noexcept;
  bool isOpen() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow
