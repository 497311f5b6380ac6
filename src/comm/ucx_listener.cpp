// UcxListener: a ucp listener on a socket address; it runs the server's side of the handshake
// (ucx_handshake.cpp) on each client, and logs and counts the refused ones.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <utility>

#include "comm/ucx_detail.hpp"
#include "comm/ucx_handshake.hpp"

namespace astraflow {

using ucx_detail::Deadline;

struct UcxListener::Impl {
  Impl(ucp_worker_h w, UcxLinkOptions opts) : worker(w), options(std::move(opts)) {}
  ~Impl() {
    for (ucp_conn_request_h request : requests) {
      const ucs_status_t status = ucp_listener_reject(listener, request);
      if (status != UCS_OK) spdlog::debug("UCX listener {}: reject: {}", address, ucs_status_string(status));
    }
    if (listener != nullptr) ucp_listener_destroy(listener);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Runs inside ucp_worker_progress: queue the request, accept() takes it from there.
  static void onConnRequest(ucp_conn_request_h request, void* arg) {
    static_cast<Impl*>(arg)->requests.push_back(request);
  }

  // The handshake with `conn`; true when the client was accepted.
  bool handshake(UcxConnection::Impl& conn, const Deadline& accept_deadline);

  ucp_worker_h worker;
  ucp_listener_h listener = nullptr;
  UcxLinkOptions options;
  std::uint16_t port = 0;
  std::string address;
  std::deque<ucp_conn_request_h> requests;
  std::uint64_t refused = 0, auth_failures = 0;
  std::string last_refusal;
};

namespace {

std::string clientAddress(ucp_conn_request_h request) {
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(request, &attr) != UCS_OK) return "unknown client";
  return ucx_detail::sockaddrToString(attr.client_address);
}

}  // namespace

bool UcxListener::Impl::handshake(UcxConnection::Impl& conn, const Deadline& accept_deadline) {
  using ucx_detail::HandshakeVerdict;
  const HandshakeVerdict verdict =
      ucx_detail::serverHandshake(conn, options, accept_deadline.capped(options.handshake_timeout_s));
  switch (verdict.outcome) {
    case HandshakeVerdict::Outcome::Accepted:
      spdlog::debug("UCX listener {}: accepted client {}", address, conn.peer);
      return true;
    case HandshakeVerdict::Outcome::Dropped:
      spdlog::warn("UCX listener {}: dropped client {} during the handshake: {}", address, conn.peer, verdict.detail);
      return false;
    case HandshakeVerdict::Outcome::Refused: break;
  }
  ++refused;
  if (verdict.keys_differ) ++auth_failures;
  last_refusal = verdict.reason;
  spdlog::warn("UCX listener {}: refused client {}: {}{}", address, conn.peer, verdict.reason,
               verdict.detail.empty() ? std::string() : " (" + verdict.detail + ")");
  // Closing first could drop the answer in flight (UCX discards stream data of a failed
  // endpoint); the client hangs up once it has read it.
  if (!conn.waitForPeerClose(options.close_timeout_s)) {
    spdlog::debug("UCX listener {}: refused client {} did not hang up within {} s", address, conn.peer,
                  options.close_timeout_s);
  }
  return false;
}

UcxListener::UcxListener(UcpWorker& worker, const std::string& host, std::uint16_t port, UcxLinkOptions options)
    : impl_(std::make_unique<Impl>(worker.raw(), std::move(options))) {
  ucx_detail::requireLinkKey(impl_->options);
  const sockaddr_storage addr = ucx_detail::resolveAddress(host, port);
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  params.conn_handler.cb = &Impl::onConnRequest;
  params.conn_handler.arg = impl_.get();
  const ucs_status_t status = ucp_listener_create(impl_->worker, &params, &impl_->listener);
  if (status != UCS_OK) {
    throw UcxError(static_cast<int>(status),
                   fmt::format("{}: {}:{}: cannot listen with UCX on {}: {}", processLocation(), __FILE__, __LINE__,
                               ucx_detail::sockaddrToString(addr), ucs_status_string(status)));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  ASTRA_UCX_CHECK(ucp_listener_query(impl_->listener, &attr));
  impl_->address = ucx_detail::sockaddrToString(attr.sockaddr);
  impl_->port = attr.sockaddr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&attr.sockaddr)->sin6_port)
                                                    : ntohs(reinterpret_cast<sockaddr_in*>(&attr.sockaddr)->sin_port);
  spdlog::debug("UCX listener on {}", impl_->address);
}

UcxListener::~UcxListener() = default;
UcxListener::UcxListener(UcxListener&& o) noexcept = default;
UcxListener& UcxListener::operator=(UcxListener&& o) noexcept = default;

std::uint16_t UcxListener::port() const { return impl_ ? impl_->port : 0; }
std::uint64_t UcxListener::refusedCount() const { return impl_ ? impl_->refused : 0; }
std::string UcxListener::lastRefusal() const { return impl_ ? impl_->last_refusal : std::string(); }
std::uint64_t UcxListener::authFailures() const { return impl_ ? impl_->auth_failures : 0; }

// The oldest pending connection request, handshaked; empty when it failed or was refused.
std::optional<UcxConnection> UcxListener::takeRequest(const ucx_detail::Deadline& deadline) {
  ucp_conn_request_h request = impl_->requests.front();
  impl_->requests.pop_front();
  auto conn = std::make_unique<UcxConnection::Impl>(impl_->worker, clientAddress(request), impl_->options);
  try {
    conn->createServerEndpoint(request);
  } catch (const UcxError& e) {
    spdlog::warn("UCX listener {}: no endpoint for client {}: {}", impl_->address, conn->peer, e.what());
    return std::nullopt;
  }
  if (!impl_->handshake(*conn, deadline)) return std::nullopt;
  return ucx_detail::ConnectionAccess::wrap(std::move(conn));
}

std::optional<UcxConnection> UcxListener::tryAccept() {
  if (!impl_) throw UcxError(0, fmt::format("{}: UCX listener is empty (moved from)", processLocation()));
  ucp_worker_progress(impl_->worker);
  while (!impl_->requests.empty()) {
    if (auto conn = takeRequest(Deadline(impl_->options.handshake_timeout_s))) return conn;
  }
  return std::nullopt;
}

UcxConnection UcxListener::accept(double timeout_s) {
  if (!impl_) throw UcxError(0, fmt::format("{}: UCX listener is empty (moved from)", processLocation()));
  const Deadline deadline(timeout_s);
  for (;;) {
    if (!ucx_detail::progressUntil(impl_->worker, deadline, [&] { return !impl_->requests.empty(); })) {
      throw UcxTimeout(static_cast<int>(UCS_ERR_TIMED_OUT),
                       fmt::format("{}: no client passed the handshake on UCX listener {} within {} s",
                                   processLocation(), impl_->address, timeout_s));
    }
    if (auto conn = takeRequest(deadline)) return std::move(*conn);
  }
}

}  // namespace astraflow
