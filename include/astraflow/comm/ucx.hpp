#pragma once
// A small UCX (ucp) message transport over sockaddr/TCP, for links between sites where MPI
// does not reach. One server binds a UcxListener to host:port; clients reach it with
// connectTo(). After the handshake each side sends framed messages (u32 kind, u64 length,
// payload, 32-byte tag) over the ucp stream API.
//
// Authentication (docs/cross-site.md, "The authenticated link"; the computation is in
// src/comm/link_auth.hpp). Both ends hold the same key, UcxLinkOptions::token, and it never
// crosses the wire. Inside accept()/connectTo() a mutual challenge-response runs on fresh
// 32-byte nonces: the server proves it holds the key (HMAC over both nonces), the client checks
// that proof and answers with its own, and the server checks that; either side refuses a peer
// whose proof does not verify, and the server says why ("authentication failed", "protocol
// version 1, this side speaks 2"). Both derive a per-connection session key from the nonces, and
// every frame after the handshake carries HMAC(session key, direction, sequence number, header,
// payload): a frame that does not verify (altered, replayed, reordered, injected, or sent
// without the key) closes the connection before its payload is returned, like any malformed
// frame, and is counted (UcxConnection::authFailures). Frames are authenticated, NOT
// encrypted: whoever can watch the link can read the payloads.
//
// Threading: one UcpWorker, and every listener and connection made on it, belongs to one
// thread (UCS_THREAD_MODE_SINGLE). Nothing here starts a thread; all progress happens inside
// the calls below, and every wait progresses the worker and backs off (Backoff), never spins.
//
// Lifetimes: a UcpContext outlives its workers, a worker outlives its listeners and
// connections. Destructors never throw: they close endpoints and log. A graceful close
// completes only once the peer's worker has progressed and acknowledged it, so closing while
// the peer is busy elsewhere (e.g. in an MPI call) waits up to close_timeout_s and then
// leaves the endpoint to UCX, which frees it with the worker.
//
// Closed connections: once a connection is closed (the peer closed or died, or this side
// dropped it after a malformed frame or a timeout inside send) every send/tryRecv/recv
// throws UcxConnectionClosed, whose message names the reason. A message whose bytes were
// only partly received when that happened is discarded, never returned. Messages the peer
// sent right before closing may be lost too (UCX drops stream data of a failed endpoint):
// peers that need a clean shutdown exchange a final message and its answer before closing.
//
// UCX configuration (UCX 1.13, Debian 12), as observed with UCX_LOG_LEVEL=debug: nothing has
// to be set for sockaddr connections, and UcpContext changes nothing by default. The
// connection manager is UCX's own TCP one ("cm tcp"; rdmacm, first in the default
// UCX_SOCKADDR_TLS_PRIORITY, does not open without RDMA devices and UCX moves on to tcp),
// and it binds and connects on 127.0.0.1. The data lane is tcp on the interface the address
// routes through, lo included ("stream(tcp/lo)"), both with UCX_TLS unset and with
// UCX_TLS=tcp, and also with UCX_NET_DEVICES=lo (a host with only loopback). UcpContext
// takes extra UCX options (e.g. {"TLS", "tcp"}) that win over the environment.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/error.hpp"

// ucp's handle types, forward-declared so that this header stays free of UCX headers.
struct ucp_context;
struct ucp_worker;

namespace astraflow {

namespace ucx_detail {
class Deadline;
struct ConnectionAccess;  // src/comm: wraps a handshaked endpoint in a UcxConnection
}  // namespace ucx_detail

// A UCX call failed, or a UCX-level operation of ours did. status() is the ucs_status_t
// behind it, 0 when astraflow detected the failure itself (e.g. a malformed frame).
class UcxError : public Error {
 public:
  UcxError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A wait (accept, connect, recv, send) ran past its timeout.
class UcxTimeout : public UcxError {
 public:
  using UcxError::UcxError;
};

// The handshake refused the link. byServer(): the server refused this client, and reason() is
// the server's reason ("protocol version 1, this side speaks 2", "authentication failed", ...);
// otherwise this client refused the server, which did not prove it holds the key (reason()
// "authentication failed"). Either way the link is not retried by its callers.
class UcxHandshakeRefused : public UcxError {
 public:
  UcxHandshakeRefused(const std::string& message, std::string reason, bool by_server = true)
      : UcxError(0, message), reason_(std::move(reason)), by_server_(by_server) {}
  const std::string& reason() const { return reason_; }
  bool byServer() const { return by_server_; }

 private:
  std::string reason_;
  bool by_server_;
};

// The connection is closed; thrown by every send/tryRecv/recv from then on.
class UcxConnectionClosed : public UcxError {
 public:
  using UcxError::UcxError;
};

// The peer sent a frame this side will not take (a length over max_message_bytes, a broken
// handshake, a tag that does not verify). The connection was closed when it was detected;
// thrown once, after that UcxConnectionClosed.
class UcxMalformedMessage : public UcxConnectionClosed {
 public:
  using UcxConnectionClosed::UcxConnectionClosed;
};

// A frame after the handshake whose tag does not verify: altered on the way, replayed,
// reordered, or made without the session key. Its payload was never returned.
class UcxAuthenticationFailed : public UcxMalformedMessage {
 public:
  using UcxMalformedMessage::UcxMalformedMessage;
};

[[noreturn]] void throwUcxError(int status, const char* call, const char* file, int line);

// Checks an expression of type ucs_status_t; anything but UCS_OK (0) throws UcxError with
// host, rank, file:line, the call and ucs_status_string().
#define ASTRA_UCX_CHECK(status_expr)                                                   \
  do {                                                                                 \
    const int astra_ucx_status_ = static_cast<int>(status_expr);                       \
    if (astra_ucx_status_ != 0) {                                                      \
      ::astraflow::throwUcxError(astra_ucx_status_, #status_expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// No deadline: wait until the operation completes or the peer fails.
inline constexpr double kUcxWaitForever = std::numeric_limits<double>::infinity();

// UCX options by name without the UCX_ prefix, e.g. {"TLS", "tcp"}.
using UcxSettings = std::vector<std::pair<std::string, std::string>>;

// One ucp context (features: stream). Reads the UCX_* environment as UCX always does;
// `settings` are applied on top and win over it.
class UcpContext {
 public:
  explicit UcpContext(const UcxSettings& settings = {});
  ~UcpContext();
  UcpContext(UcpContext&& o) noexcept;
  UcpContext& operator=(UcpContext&& o) noexcept;
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;

  ucp_context* raw() const { return context_; }

 private:
  ucp_context* context_ = nullptr;
};

// One single-threaded ucp worker. `context` must outlive it.
class UcpWorker {
 public:
  explicit UcpWorker(const UcpContext& context);
  ~UcpWorker();
  UcpWorker(UcpWorker&& o) noexcept;
  UcpWorker& operator=(UcpWorker&& o) noexcept;
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;

  // One ucp_worker_progress: the number of events it handled (0: nothing happened).
  unsigned progress();
  ucp_worker* raw() const { return worker_; }

 private:
  ucp_worker* worker_ = nullptr;
};

// What both ends of a link agree on. The token is the shared key: it keys the handshake's
// proofs and never crosses the wire, is never logged and never put in an error message. It
// must not be empty.
struct UcxLinkOptions {
  std::string token;
  // 2: the authenticated handshake and tagged frames. A peer that speaks another version is
  // refused by the server with both versions named (a version-1 client's hello still parses).
  std::uint32_t protocol_version = 2;
  // Largest incoming payload this side accepts, in bytes; a frame announcing more closes the
  // connection before anything is allocated. Sent to the peer in the handshake, so the
  // peer's send() refuses such a message locally (without closing) instead.
  std::uint64_t max_message_bytes = std::uint64_t{256} << 20;
  // Server: how long one client may take over its whole handshake, in seconds, so that a
  // silent client cannot hold accept() for its whole timeout.
  double handshake_timeout_s = 10.0;
  // Bound on a graceful close (destructor, close(), and the server waiting for a refused
  // client to hang up after reading the reason), in seconds.
  double close_timeout_s = 2.0;
};

struct UcxMessage {
  std::uint32_t kind = 0;
  std::vector<std::byte> payload;
};

// One handshaked endpoint. Move-only; a default-constructed one is closed.
class UcxConnection {
 public:
  UcxConnection();
  ~UcxConnection();  // close(options.close_timeout_s), logging instead of throwing
  UcxConnection(UcxConnection&& o) noexcept;
  UcxConnection& operator=(UcxConnection&& o) noexcept;
  UcxConnection(const UcxConnection&) = delete;
  UcxConnection& operator=(const UcxConnection&) = delete;

  // Blocks (progress + Backoff) until the frame (and its tag) has left this side's buffers. The
  // tag is computed over the payload in place, before anything is sent. Throws
  // UcxError without closing when the payload is over the peer's max_message_bytes,
  // UcxConnectionClosed when the connection is or becomes closed, UcxTimeout after
  // timeout_s (the connection is then closed: a partial frame may have gone out).
  void send(std::uint32_t kind, std::span<const std::byte> payload, double timeout_s = kUcxWaitForever);
  // Queues the frame and returns at once (the payload moves into the connection): it leaves as
  // the link allows, in order with every other frame, progressed by tryRecv(), post() and
  // progressSends(). For callers that must never wait on a slow peer; they bound the outbox
  // themselves with queuedBytes()/oldestQueuedSeconds(). Throws like send() for a closed
  // connection or an oversize payload; a frame that fails later closes the connection.
  void post(std::uint32_t kind, std::vector<std::byte> payload);
  // Frees what has left of the posted frames (one progress call); never blocks.
  void progressSends();
  std::uint64_t queuedBytes() const;  // posted, not yet gone (headers and tags included)
  std::size_t queuedFrames() const;
  double oldestQueuedSeconds() const;  // age of the oldest frame still queued; 0 when none

  // Progresses the worker once and returns the next complete message, if one is there; only a
  // message whose tag verified is ever returned. Throws UcxConnectionClosed (or, once,
  // UcxMalformedMessage, UcxAuthenticationFailed for a tag) as described above.
  std::optional<UcxMessage> tryRecv();
  // Waits up to timeout_s for the next message; UcxTimeout after it (the connection stays
  // open and a partly received message is kept for the next call).
  UcxMessage recv(double timeout_s);

  // Graceful close (forced when the peer already failed) that waits at most timeout_s; one
  // the peer has not acknowledged by then is left to UCX. Idempotent, never throws.
  void close(double timeout_s);
  // Drops the connection at once (forced endpoint close): pending and queued sends are cancelled,
  // nothing is waited for. For a peer given up on. Idempotent, never throws.
  void abort(const std::string& reason);
  bool isOpen() const;
  // Why the connection closed ("" while open).
  std::string closeReason() const;
  // "address:port" of the other side, for messages.
  std::string peer() const;
  std::uint64_t peerMaxMessageBytes() const;
  // Incoming frames refused because their tag did not verify (0 or 1: the first closes it).
  std::uint64_t authFailures() const;

  // Writes `bytes` to the stream as they are, with no frame header and no tag, blocking like
  // send(). Only for tests of the receiver's framing and authentication checks.
  void sendUnframedForTesting(std::span<const std::byte> bytes, double timeout_s = kUcxWaitForever);
  // The exact bytes send() would put on the wire for this frame next (header, payload, tag),
  // without sending them; the send sequence moves on as if they had been sent. Only for tests
  // that replay, reorder or alter frames through sendUnframedForTesting.
  std::vector<std::byte> sealFrameForTesting(std::uint32_t kind, std::span<const std::byte> payload);

  struct Impl;

 private:
  explicit UcxConnection(std::unique_ptr<Impl> impl);
  friend struct ucx_detail::ConnectionAccess;
  std::unique_ptr<Impl> impl_;
};

// Connects to a UcxListener at host:port (a name or numeric IPv4/IPv6 address) and runs the
// handshake. Throws UcxHandshakeRefused with the server's reason (or with byServer() false when
// the server did not prove it holds the key), UcxTimeout, or UcxError when the server cannot be
// reached.
UcxConnection connectTo(UcpWorker& worker, const std::string& host, std::uint16_t port, const UcxLinkOptions& options,
                        double timeout_s);

// Listens on host:port (port 0: an ephemeral port, see port(); host "" or "0.0.0.0": every
// IPv4 interface). `worker` must outlive it.
class UcxListener {
 public:
  UcxListener(UcpWorker& worker, const std::string& host, std::uint16_t port, UcxLinkOptions options);
  ~UcxListener();  // rejects connection requests not yet accepted
  UcxListener(UcxListener&& o) noexcept;
  UcxListener& operator=(UcxListener&& o) noexcept;
  UcxListener(const UcxListener&) = delete;
  UcxListener& operator=(const UcxListener&) = delete;

  std::uint16_t port() const;

  // Returns the next client that passes the handshake. Clients that are refused (another
  // version, a proof that does not verify, a client that did not accept this side's proof, a
  // bad hello) are told why, logged (warn, with their address, never the key) and counted,
  // and accept() goes on waiting for the next one; clients that fail or stall during the
  // handshake are logged and dropped. Throws UcxTimeout after timeout_s.
  UcxConnection accept(double timeout_s);
  // One progress call; a client that asked to connect meanwhile is handshaked (waiting at most
  // handshake_timeout_s for its hello) and returned. Empty when none asked, or it was refused.
  std::optional<UcxConnection> tryAccept();

  // Clients refused in the handshake so far, and the reason given to the last one.
  std::uint64_t refusedCount() const;
  std::string lastRefusal() const;
  // Of those, the ones refused because the keys differ ("authentication failed").
  std::uint64_t authFailures() const;

  struct Impl;

 private:
  std::optional<UcxConnection> takeRequest(const ucx_detail::Deadline& deadline);
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow
