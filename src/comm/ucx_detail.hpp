#pragma once
// Private to src/comm/ucx*.cpp: the connection's state, the wire format, and the waits the
// connection and the listener share.
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/ucx.hpp"
#include "astraflow/core/byte_io.hpp"
#include "comm/link_auth.hpp"

namespace astraflow::ucx_detail {

// Frame header on the wire: kind u32, then payload length u64, both little-endian. After the
// handshake the payload is followed by a link_auth::kTagBytes tag (not counted in the length).
inline constexpr std::size_t kFrameHeaderBytes = 12;
// Handshake frames (src/comm/ucx_handshake.cpp), untagged; none may exceed kMaxHandshakeBytes.
inline constexpr std::uint32_t kHelloKind = 0xA57F0001u;       // client: version, limit, nonce
inline constexpr std::uint32_t kWelcomeKind = 0xA57F0002u;     // server: accepted or refused, why
inline constexpr std::uint32_t kChallengeKind = 0xA57F0003u;   // server: limit, nonce, proof
inline constexpr std::uint32_t kResponseKind = 0xA57F0004u;    // client: verdict on the server, proof
inline constexpr std::uint32_t kHandshakeMagic = 0x46545341u;  // "ASTF"
inline constexpr std::size_t kMaxHandshakeBytes = 16 * 1024;

// The 12 header bytes of a frame.
std::array<std::byte, kFrameHeaderBytes> frameHeader(std::uint32_t kind, std::uint64_t length);

// A point in time to give up at; infinite when built from kUcxWaitForever.
class Deadline {
 public:
  explicit Deadline(double timeout_s);
  bool passed() const { return !forever_ && std::chrono::steady_clock::now() >= at_; }
  // The earlier of this and now + timeout_s.
  Deadline capped(double timeout_s) const;

 private:
  std::chrono::steady_clock::time_point at_{};
  bool forever_ = true;
};

// Progresses `worker` until done() or the deadline; true when done() held. Backs off while
// the worker has nothing to do.
template <class Done>
bool progressUntil(ucp_worker_h worker, const Deadline& deadline, Done done) {
  Backoff backoff;
  while (!done()) {
    if (deadline.passed()) return false;
    backoff.after(ucp_worker_progress(worker) != 0);
  }
  return true;
}

// Waits for an outstanding request (from a *_nbx call) up to the deadline, then frees it.
// When it is still pending then, it is cancelled and given `grace` more; a request that
// outlives that is freed anyway (UCX releases it on completion) and logged. Never throws.
ucs_status_t finishRequest(ucp_worker_h worker, void* request, const Deadline& deadline, const char* what);

std::string sockaddrToString(const sockaddr_storage& addr);
// host: a name or numeric address; "" means the IPv4 wildcard.
sockaddr_storage resolveAddress(const std::string& host, std::uint16_t port);

}  // namespace astraflow::ucx_detail

namespace astraflow {

struct UcxConnection::Impl {
  Impl(ucp_worker_h w, std::string peer_name, const UcxLinkOptions& options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Creates the endpoint: on a server from a connection request, on a client to `addr`.
  void createServerEndpoint(ucp_conn_request_h request);
  void createClientEndpoint(const sockaddr_storage& addr);

  // Writes the bytes to the stream, framed or not, waiting as UcxConnection::send says.
  void sendBytes(std::span<const std::span<const std::byte>> parts, const ucx_detail::Deadline& deadline);
  // One frame: header, payload and, once the handshake has set `auth`, its tag.
  void sendFrame(std::uint32_t kind, std::span<const std::byte> payload, const ucx_detail::Deadline& deadline);
  // From here on every frame is tagged and every incoming one must verify (the handshake's
  // last step, on both sides).
  void startAuthentication(const link_auth::Tag& session_key, link_auth::FrameAuthenticator::Role role);
  // Advances the receive state machine as far as the data that is there allows; a message
  // once one is complete. `limit`: the largest payload accepted.
  std::optional<UcxMessage> pollRecv(std::uint64_t limit);
  UcxMessage recvFrame(std::uint64_t limit, const ucx_detail::Deadline& deadline, const char* what);

  [[noreturn]] void throwClosed() const;
  void throwIfClosed() const;
  // Marks the connection closed for `reason`, drops its endpoint (forced) and any partial
  // message. Never throws.
  void markClosed(const std::string& reason);
  // Graceful close bounded by timeout_s, forced when the endpoint already failed.
  void close(double timeout_s);
  // Waits up to timeout_s for the peer to hang up (the endpoint's error handler to fire).
  bool waitForPeerClose(double timeout_s);

  // Refuses a frame before anything is sent: the connection is closed, or the payload is over
  // what the peer accepts (UcxError, the connection stays open). For send() and post().
  void checkOutgoing(std::uint32_t kind, std::size_t payload_bytes) const;

  // The outbox (src/comm/ucx_outbox.cpp): frames posted without waiting, in order.
  void post(std::uint32_t kind, std::vector<std::byte> payload);
  // Frees the frames that have left; closes the connection when one failed. Never blocks.
  void progressOutbox();
  // After the endpoint is closed (which completes or cancels its sends): releases every request.
  void releaseOutbox();

  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  ucp_worker_h worker;
  ucp_ep_h ep = nullptr;
  std::string peer;
  UcxLinkOptions options;
  std::uint64_t peer_max_message_bytes = 0;

  // Set by the endpoint's error handler (inside ucp_worker_progress): the peer is gone.
  bool failed = false;
  ucs_status_t fail_status = UCS_OK;
  bool closed = false;
  std::string close_reason;

  // Set at the end of the handshake: seals outgoing frames, checks incoming ones.
  std::optional<link_auth::FrameAuthenticator> auth;
  std::uint64_t auth_failures = 0;

  // Receiving one frame: header, payload (none when its length is 0), tag (once `auth` is set).
  enum class RecvPhase { Idle, Header, Payload, Tag };
  RecvPhase phase = RecvPhase::Idle;
  std::array<std::byte, ucx_detail::kFrameHeaderBytes> header{};
  std::uint32_t incoming_kind = 0;
  std::vector<std::byte> incoming;
  link_auth::Tag incoming_tag{};
  void* recv_request = nullptr;

  // A posted frame: its header, payload and tag stay here, at a fixed address, until UCX is
  // done with them (a deque does not move its elements when either end changes).
  struct QueuedFrame {
    std::array<std::byte, ucx_detail::kFrameHeaderBytes> header{};
    std::vector<std::byte> payload;
    link_auth::Tag tag{};
    bool tagged = false;
    std::array<void*, 3> requests{};  // header, payload, tag; nullptr: completed at once (or none)
    std::chrono::steady_clock::time_point posted;
    std::uint64_t wireBytes() const { return header.size() + payload.size() + (tagged ? tag.size() : 0); }
  };
  std::deque<QueuedFrame> outbox;
  std::uint64_t outbox_bytes = 0;  // wire bytes (header, payload, tag) of the frames in the outbox

 private:
  // Posts a WAITALL stream receive of exactly `bytes` into `into`; true when it completed
  // at once. Closes the connection and throws on error.
  bool postRecv(void* into, std::size_t bytes);
  // The pending receive finished (true) or is still running (false); throws when it failed.
  bool recvDone();
  void releaseRecvRequest();
  // The steps of the receive state machine, each run once its part is in place.
  std::optional<UcxMessage> headerArrived(std::uint64_t limit);
  std::optional<UcxMessage> payloadArrived();
  std::optional<UcxMessage> tagArrived();
  // A tag did not verify: count, log, close, throw UcxAuthenticationFailed.
  [[noreturn]] void refuseUnauthenticated();
  void closeEndpoint(bool force, double timeout_s);
};

}  // namespace astraflow

namespace astraflow::ucx_detail {

struct ConnectionAccess {
  static UcxConnection wrap(std::unique_ptr<UcxConnection::Impl> impl) { return UcxConnection(std::move(impl)); }
};

}  // namespace astraflow::ucx_detail
