// WebSocketClient (websocket.hpp) over Boost.Beast: each operation is started asynchronously and
// the connection's own io_context is run until it completes; the TCP stream's timer bounds it
// (Beast's websocket timeouts stay off, so that timer is the only deadline).
#include "astraflow/http/websocket.hpp"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace astraflow {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

struct Endpoint {
  std::string host, port, path;
};

Endpoint parseUrl(const std::string& url) {
  std::string_view rest = url;
  for (std::string_view scheme : {"ws://", "http://"}) {
    if (rest.substr(0, scheme.size()) == scheme) {
      rest.remove_prefix(scheme.size());
      Endpoint e;
      const std::size_t slash = rest.find('/');
      const std::string_view authority = rest.substr(0, slash);
      e.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
      const std::size_t colon = authority.rfind(':');
      e.host = std::string(authority.substr(0, colon));
      e.port = colon == std::string_view::npos ? "80" : std::string(authority.substr(colon + 1));
      if (e.host.empty() || e.port.empty())
        throw WebSocketError(fmt::format("WebSocket URL '{}' names no host:port", url), false);
      return e;
    }
  }
  throw WebSocketError(
      fmt::format("WebSocket URL '{}' does not start with ws:// or http:// (wss is not supported)", url), false);
}

}  // namespace

struct WebSocketClient::Impl {
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  std::string url;
  bool open = false;

  // Starts `op` (given a completion handler) and runs the io_context until it completes; the
  // stream's timer cancels it at the deadline.
  template <class Op>
  void run(std::chrono::milliseconds timeout, const char* what, Op&& op) {
    beast::get_lowest_layer(ws).expires_after(timeout);
    beast::error_code result = net::error::operation_aborted;
    op([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    if (!result) return;
    open = false;
    beast::error_code ignored;
    beast::get_lowest_layer(ws).socket().close(ignored);
    const bool timed_out = result == beast::error::timeout;
    throw WebSocketError(
        fmt::format("WebSocket {} {}: {}", what, url,
                    timed_out ? fmt::format("no answer within {} ms", timeout.count()) : result.message()),
        timed_out);
  }
};

WebSocketClient::WebSocketClient(const std::string& url, std::chrono::milliseconds timeout,
                                 std::size_t max_message_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = url;
  const Endpoint e = parseUrl(url);
  tcp::resolver resolver(impl_->ioc);
  beast::error_code ec;
  const auto addresses = resolver.resolve(e.host, e.port, ec);
  if (ec) throw WebSocketError(fmt::format("WebSocket {}: cannot resolve {}: {}", url, e.host, ec.message()), false);
  impl_->run(timeout, "connect to",
             [&](auto handler) { beast::get_lowest_layer(impl_->ws).async_connect(addresses, std::move(handler)); });
  // Small messages each way: Nagle's delay would add up to 40 ms per exchange.
  beast::get_lowest_layer(impl_->ws).socket().set_option(tcp::no_delay(true), ec);
  impl_->ws.read_message_max(max_message_bytes);
  impl_->ws.text(true);
  const std::string host = e.host + ":" + e.port;
  impl_->run(timeout, "handshake with",
             [&](auto handler) { impl_->ws.async_handshake(host, e.path, std::move(handler)); });
  impl_->open = true;
}

WebSocketClient::~WebSocketClient() {
  if (!impl_ || !impl_->open) return;
  try {
    impl_->run(std::chrono::milliseconds(200), "close of",
               [&](auto handler) { impl_->ws.async_close(websocket::close_code::normal, std::move(handler)); });
  } catch (const WebSocketError&) {
    // The peer is gone or slow: the socket closes with the stream either way.
  }
}

void WebSocketClient::send(std::string_view text, std::chrono::milliseconds timeout) {
  if (!impl_->open) throw WebSocketError(fmt::format("WebSocket {}: send on a closed connection", impl_->url), false);
  impl_->run(timeout, "send to",
             [&](auto handler) { impl_->ws.async_write(net::buffer(text.data(), text.size()), std::move(handler)); });
}

std::string WebSocketClient::receive(std::chrono::milliseconds timeout) {
  if (!impl_->open)
    throw WebSocketError(fmt::format("WebSocket {}: receive on a closed connection", impl_->url), false);
  impl_->buffer.clear();
  impl_->run(timeout, "receive from", [&](auto handler) { impl_->ws.async_read(impl_->buffer, std::move(handler)); });
  return beast::buffers_to_string(impl_->buffer.data());
}

void WebSocketClient::finish(std::string_view last, std::chrono::milliseconds timeout) noexcept {
  try {
    send(last, timeout);
    // Messages the peer still sends are dropped; its close frame ends the read (Beast answers it).
    for (int i = 0; i < 16 && impl_->open; ++i) receive(timeout);
  } catch (const WebSocketError&) {
    // Closed (as asked), or the peer is gone: either way it is over.
  } catch (const std::exception&) {
  }
  impl_->open = false;
}

bool WebSocketClient::isOpen() const { return impl_->open; }

}  // namespace astraflow
