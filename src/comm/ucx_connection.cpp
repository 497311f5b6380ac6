// UcxConnection: one ucp endpoint carrying framed messages over the stream API; after the
// handshake (ucx_handshake.cpp) every frame is tagged on the way out and checked on the way in.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "comm/ucx_detail.hpp"

namespace astraflow {

using ucx_detail::Deadline;
using ucx_detail::kFrameHeaderBytes;

UcxConnection::Impl::Impl(ucp_worker_h w, std::string peer_name, const UcxLinkOptions& opts)
    : worker(w), peer(std::move(peer_name)), options(opts) {}

UcxConnection::Impl::~Impl() {
  try {
    close(options.close_timeout_s);
  } catch (const std::exception& e) {
    spdlog::error("closing UCX connection to {}: {}", peer, e.what());
  } catch (...) {
    spdlog::error("closing UCX connection to {}: unknown error", peer);
  }
}

void UcxConnection::Impl::onEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  // Runs inside ucp_worker_progress, where closing the endpoint is not allowed: only note it.
  auto* self = static_cast<Impl*>(arg);
  self->failed = true;
  self->fail_status = status;
}

namespace {

ucp_ep_params_t errorHandlingParams(UcxConnection::Impl* impl) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  // PEER mode: a peer that closes or dies fails the endpoint (error handler, pending
  // requests completed with an error) instead of leaving its operations hanging.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxConnection::Impl::onEndpointError;
  params.err_handler.arg = impl;
  return params;
}

}  // namespace

void UcxConnection::Impl::createServerEndpoint(ucp_conn_request_h request) {
  ucp_ep_params_t params = errorHandlingParams(this);
  params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
  params.conn_request = request;
  ASTRA_UCX_CHECK(ucp_ep_create(worker, &params, &ep));
}

void UcxConnection::Impl::createClientEndpoint(const sockaddr_storage& addr) {
  ucp_ep_params_t params = errorHandlingParams(this);
  params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  ASTRA_UCX_CHECK(ucp_ep_create(worker, &params, &ep));
}

void UcxConnection::Impl::throwClosed() const {
  throw UcxConnectionClosed(static_cast<int>(fail_status), fmt::format("{}: UCX connection to {} is closed: {}",
                                                                       processLocation(), peer, close_reason));
}

void UcxConnection::Impl::throwIfClosed() const {
  if (closed) throwClosed();
}

void UcxConnection::Impl::closeEndpoint(bool force, double timeout_s) {
  if (ep == nullptr) return;
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* request = ucp_ep_close_nbx(std::exchange(ep, nullptr), &params);
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) {
    spdlog::debug("UCX close of endpoint to {}: {}", peer, ucs_status_string(UCS_PTR_STATUS(request)));
    return;
  }
  const bool done = ucx_detail::progressUntil(worker, Deadline(timeout_s),
                                              [&] { return ucp_request_check_status(request) != UCS_INPROGRESS; });
  if (!done) {
    // A graceful close waits for the peer; one that does not answer is left to UCX, which
    // destroys the endpoint with the worker.
    spdlog::warn("UCX close of endpoint to {} did not finish within {} s; left to UCX", peer, timeout_s);
    ucp_request_free(request);
    return;
  }
  const ucs_status_t status = ucp_request_check_status(request);
  ucp_request_free(request);
  if (status != UCS_OK) spdlog::debug("UCX close of endpoint to {}: {}", peer, ucs_status_string(status));
}

void UcxConnection::Impl::releaseRecvRequest() {
  if (recv_request == nullptr) return;
  // The endpoint is closed by now, which completes its stream receives; give it a moment.
  ucx_detail::finishRequest(worker, std::exchange(recv_request, nullptr), Deadline(options.close_timeout_s),
                            "stream receive");
}

void UcxConnection::Impl::markClosed(const std::string& reason) {
  if (closed) return;
  closed = true;
  close_reason = reason;
  closeEndpoint(/*force=*/true, options.close_timeout_s);
  releaseRecvRequest();
  releaseOutbox();
  incoming.clear();
  incoming.shrink_to_fit();
  phase = RecvPhase::Idle;
}

void UcxConnection::Impl::close(double timeout_s) {
  if (!closed) {
    closed = true;
    close_reason = "closed by this side";
  }
  closeEndpoint(/*force=*/failed, timeout_s);  // a graceful close flushes the outbox first
  releaseRecvRequest();
  releaseOutbox();
  incoming.clear();
  phase = RecvPhase::Idle;
}

bool UcxConnection::Impl::waitForPeerClose(double timeout_s) {
  return ucx_detail::progressUntil(worker, Deadline(timeout_s), [&] { return failed; });
}

namespace {

std::string peerGoneReason(ucs_status_t status) {
  return fmt::format("the peer closed or failed ({})", ucs_status_string(status));
}

}  // namespace

void UcxConnection::Impl::sendBytes(std::span<const std::span<const std::byte>> parts, const Deadline& deadline) {
  throwIfClosed();
  if (failed) {
    markClosed(peerGoneReason(fail_status));
    throwClosed();
  }
  std::vector<void*> pending;
  ucs_status_t error = UCS_OK;
  ucp_request_param_t params{};  // contiguous bytes, no callback: completion is polled
  for (const auto part : parts) {
    if (part.empty()) continue;
    void* request = ucp_stream_send_nbx(ep, part.data(), part.size(), &params);
    if (UCS_PTR_IS_ERR(request)) {
      error = UCS_PTR_STATUS(request);
      break;
    }
    if (request != nullptr) pending.push_back(request);
  }
  auto allDone = [&] {
    for (void* r : pending) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
    }
    return true;
  };
  const bool finished =
      error == UCS_OK && ucx_detail::progressUntil(worker, deadline, [&] { return failed || allDone(); });
  if (finished && !failed) {
    for (void* r : pending) {
      const ucs_status_t status = ucp_request_check_status(r);
      ucp_request_free(r);
      if (status != UCS_OK && error == UCS_OK) error = status;
    }
    if (error == UCS_OK) return;
    pending.clear();
  }
  // Failed or timed out with parts of the frame possibly gone: the stream is unusable.
  const bool timed_out = error == UCS_OK && !failed;
  std::string reason;
  if (failed) {
    reason = peerGoneReason(fail_status);
  } else if (timed_out) {
    reason = "a send did not complete within its timeout";
  } else {
    reason = fmt::format("stream send failed ({})", ucs_status_string(error));
  }
  markClosed(reason);  // closing the endpoint completes its pending sends
  for (void* r : pending) ucx_detail::finishRequest(worker, r, Deadline(options.close_timeout_s), "stream send");
  if (timed_out) {
    throw UcxTimeout(static_cast<int>(UCS_ERR_TIMED_OUT),
                     fmt::format("{}: UCX send to {} timed out; connection closed", processLocation(), peer));
  }
  throwClosed();
}

void UcxConnection::Impl::checkOutgoing(std::uint32_t kind, std::size_t payload_bytes) const {
  throwIfClosed();
  if (payload_bytes > peer_max_message_bytes) {
    throw UcxError(0, fmt::format("{}: message of {} bytes (kind {:#x}) is over the {} bytes UCX peer {} accepts",
                                  processLocation(), payload_bytes, kind, peer_max_message_bytes, peer));
  }
}

void UcxConnection::Impl::sendFrame(std::uint32_t kind, std::span<const std::byte> payload, const Deadline& deadline) {
  throwIfClosed();  // a closed connection consumes no sequence number
  const auto frame_header = ucx_detail::frameHeader(kind, payload.size());
  if (!auth) {
    const std::span<const std::byte> parts[] = {frame_header, payload};
    sendBytes(parts, deadline);
    return;
  }
  // Over the payload where it lies; it is sent from there too (no copy of a large update).
  const link_auth::Tag tag = auth->seal(kind, payload);
  const std::span<const std::byte> parts[] = {frame_header, payload, tag};
  sendBytes(parts, deadline);
}

void UcxConnection::Impl::startAuthentication(const link_auth::Tag& session_key,
                                              link_auth::FrameAuthenticator::Role role) {
  auth.emplace(session_key, role);
}

bool UcxConnection::Impl::postRecv(void* into, std::size_t bytes) {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_STREAM_RECV_FLAG_WAITALL;  // complete only with all `bytes` in place
  std::size_t length = 0;
  void* request = ucp_stream_recv_nbx(ep, into, bytes, &length, &params);
  if (request == nullptr) return true;
  if (UCS_PTR_IS_ERR(request)) {
    markClosed(failed ? peerGoneReason(fail_status)
                      : fmt::format("stream receive failed ({})", ucs_status_string(UCS_PTR_STATUS(request))));
    throwClosed();
  }
  recv_request = request;
  return false;
}

bool UcxConnection::Impl::recvDone() {
  if (recv_request == nullptr) return true;
  const ucs_status_t status = ucp_request_check_status(recv_request);
  if (status == UCS_INPROGRESS) {
    if (failed) {
      markClosed(peerGoneReason(fail_status));
      throwClosed();
    }
    return false;
  }
  ucp_request_free(std::exchange(recv_request, nullptr));
  if (status != UCS_OK) {
    markClosed(failed ? peerGoneReason(fail_status)
                      : fmt::format("stream receive failed ({})", ucs_status_string(status)));
    throwClosed();
  }
  return true;
}

std::optional<UcxMessage> UcxConnection::Impl::headerArrived(std::uint64_t limit) {
  // The header was received whole (kFrameHeaderBytes), so these reads cannot fail.
  ByteReader in(header, "UCX frame header");
  std::uint64_t length = 0;
  in.get(incoming_kind, "kind");
  in.get(length, "length");
  if (length > limit) {
    const std::string reason = fmt::format("incoming frame of kind {:#x} announces {} bytes, over the limit of {}",
                                           incoming_kind, length, limit);
    spdlog::warn("closing UCX connection to {}: malformed frame: {}", peer, reason);
    markClosed("malformed frame: " + reason);
    throw UcxMalformedMessage(0, fmt::format("{}: UCX connection to {} closed: {}", processLocation(), peer, reason));
  }
  incoming.clear();
  if (length == 0) return payloadArrived();
  incoming.resize(length);
  phase = RecvPhase::Payload;
  if (!postRecv(incoming.data(), length)) return std::nullopt;
  return payloadArrived();
}

std::optional<UcxMessage> UcxConnection::Impl::payloadArrived() {
  if (!auth) {  // a handshake frame
    phase = RecvPhase::Idle;
    return UcxMessage{incoming_kind, std::move(incoming)};
  }
  phase = RecvPhase::Tag;
  if (!postRecv(incoming_tag.data(), incoming_tag.size())) return std::nullopt;
  return tagArrived();
}

std::optional<UcxMessage> UcxConnection::Impl::tagArrived() {
  // The payload is checked where it was received: nothing is handed on before its tag verified.
  if (!auth->open(incoming_kind, incoming, incoming_tag)) refuseUnauthenticated();
  phase = RecvPhase::Idle;
  return UcxMessage{incoming_kind, std::move(incoming)};
}

void UcxConnection::Impl::refuseUnauthenticated() {
  ++auth_failures;
  const std::string reason = fmt::format(
      "incoming frame #{} (kind {:#x}, {} bytes) failed authentication: altered, replayed, reordered "
      "or not made with this link's key",
      auth->framesOpened(), incoming_kind, incoming.size());
  spdlog::warn("closing UCX connection to {}: {}", peer, reason);
  markClosed("malformed frame: " + reason);
  throw UcxAuthenticationFailed(0, fmt::format("{}: UCX connection to {} closed: {}", processLocation(), peer, reason));
}

std::optional<UcxMessage> UcxConnection::Impl::pollRecv(std::uint64_t limit) {
  throwIfClosed();
  for (;;) {
    switch (phase) {
      case RecvPhase::Idle:
        // Checked only between messages: one that completed before the failure is kept.
        if (failed) {
          markClosed(peerGoneReason(fail_status));
          throwClosed();
        }
        phase = RecvPhase::Header;
        if (!postRecv(header.data(), header.size())) return std::nullopt;
        if (auto message = headerArrived(limit)) return message;
        break;
      case RecvPhase::Header:
        if (!recvDone()) return std::nullopt;
        if (auto message = headerArrived(limit)) return message;
        break;
      case RecvPhase::Payload:
        if (!recvDone()) return std::nullopt;
        if (auto message = payloadArrived()) return message;
        break;
      case RecvPhase::Tag:
        if (!recvDone()) return std::nullopt;
        return tagArrived();
    }
  }
}

UcxMessage UcxConnection::Impl::recvFrame(std::uint64_t limit, const Deadline& deadline, const char* what) {
  Backoff backoff;
  for (;;) {
    if (auto message = pollRecv(limit)) return std::move(*message);
    if (deadline.passed()) {
      throw UcxTimeout(static_cast<int>(UCS_ERR_TIMED_OUT),
                       fmt::format("{}: no {} from UCX peer {} within the timeout", processLocation(), what, peer));
    }
    backoff.after(ucp_worker_progress(worker) != 0);
  }
}

// ---- public face ------------------------------------------------------------------------

UcxConnection::UcxConnection() = default;
UcxConnection::UcxConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxConnection::~UcxConnection() = default;
UcxConnection::UcxConnection(UcxConnection&& o) noexcept = default;
UcxConnection& UcxConnection::operator=(UcxConnection&& o) noexcept = default;

namespace {

[[noreturn]] void throwEmpty() {
  throw UcxConnectionClosed(
      0, fmt::format("{}: UCX connection is empty (default-constructed or moved from)", processLocation()));
}

}  // namespace

void UcxConnection::send(std::uint32_t kind, std::span<const std::byte> payload, double timeout_s) {
  if (!impl_) throwEmpty();
  impl_->checkOutgoing(kind, payload.size());
  impl_->sendFrame(kind, payload, Deadline(timeout_s));
}

void UcxConnection::sendUnframedForTesting(std::span<const std::byte> bytes, double timeout_s) {
  if (!impl_) throwEmpty();
  const std::span<const std::byte> parts[] = {bytes};
  impl_->sendBytes(parts, Deadline(timeout_s));
}

std::vector<std::byte> UcxConnection::sealFrameForTesting(std::uint32_t kind, std::span<const std::byte> payload) {
  if (!impl_) throwEmpty();
  impl_->checkOutgoing(kind, payload.size());
  if (!impl_->auth) throw UcxError(0, fmt::format("{}: UCX connection has no session key yet", processLocation()));
  const auto frame_header = ucx_detail::frameHeader(kind, payload.size());
  const link_auth::Tag tag = impl_->auth->seal(kind, payload);
  std::vector<std::byte> frame(frame_header.size() + payload.size() + tag.size());
  auto at = std::copy(frame_header.begin(), frame_header.end(), frame.begin());
  at = std::copy(payload.begin(), payload.end(), at);
  std::copy(tag.begin(), tag.end(), at);
  return frame;
}

std::optional<UcxMessage> UcxConnection::tryRecv() {
  if (!impl_) throwEmpty();
  impl_->throwIfClosed();
  impl_->progressOutbox();  // progresses the worker once
  impl_->throwIfClosed();
  return impl_->pollRecv(impl_->options.max_message_bytes);
}

UcxMessage UcxConnection::recv(double timeout_s) {
  if (!impl_) throwEmpty();
  return impl_->recvFrame(impl_->options.max_message_bytes, Deadline(timeout_s), "message");
}

void UcxConnection::close(double timeout_s) {
  if (impl_) impl_->close(timeout_s);
}

void UcxConnection::abort(const std::string& reason) {
  if (impl_) impl_->markClosed(reason);
}

bool UcxConnection::isOpen() const { return impl_ && !impl_->closed; }

std::string UcxConnection::closeReason() const {
  if (!impl_) return "empty connection";
  return impl_->closed ? impl_->close_reason : std::string();
}

std::string UcxConnection::peer() const { return impl_ ? impl_->peer : std::string(); }

std::uint64_t UcxConnection::peerMaxMessageBytes() const { return impl_ ? impl_->peer_max_message_bytes : 0; }

std::uint64_t UcxConnection::authFailures() const { return impl_ ? impl_->auth_failures : 0; }

}  // namespace astraflow
