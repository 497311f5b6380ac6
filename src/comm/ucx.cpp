// UCX basics: the check macro's error, context and worker ownership, and the helpers the
// connection (ucx_connection.cpp, ucx_outbox.cpp), the handshake (ucx_handshake.cpp) and the
// listener (ucx_listener.cpp) share.
#include "astraflow/comm/ucx.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "comm/ucx_detail.hpp"

namespace astraflow {

void throwUcxError(int status, const char* call, const char* file, int line) {
  throw UcxError(status, fmt::format("{}: {}:{}: {} failed: {}", processLocation(), file, line, call,
                                     ucs_status_string(static_cast<ucs_status_t>(status))));
}

UcpContext::UcpContext(const UcxSettings& settings) {
  ucp_config_t* config = nullptr;
  ASTRA_UCX_CHECK(ucp_config_read(nullptr, nullptr, &config));
  // Nothing needs changing for sockaddr connections on UCX 1.13 (see ucx.hpp); `settings` are
  // the caller's choices, applied over the environment.
  for (const auto& [name, value] : settings) {
    const ucs_status_t status = ucp_config_modify(config, name.c_str(), value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      throw UcxError(static_cast<int>(status), fmt::format("{}: UCX option {}={} refused: {}", processLocation(), name,
                                                           value, ucs_status_string(status)));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_STREAM;
  const ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  ASTRA_UCX_CHECK(status);
}

UcpContext::~UcpContext() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

UcpContext::UcpContext(UcpContext&& o) noexcept : context_(std::exchange(o.context_, nullptr)) {}

UcpContext& UcpContext::operator=(UcpContext&& o) noexcept {
  if (this != &o) {
    if (context_ != nullptr) ucp_cleanup(context_);
    context_ = std::exchange(o.context_, nullptr);
  }
  return *this;
}

UcpWorker::UcpWorker(const UcpContext& context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ASTRA_UCX_CHECK(ucp_worker_create(context.raw(), &params, &worker_));
}

UcpWorker::~UcpWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

UcpWorker::UcpWorker(UcpWorker&& o) noexcept : worker_(std::exchange(o.worker_, nullptr)) {}

UcpWorker& UcpWorker::operator=(UcpWorker&& o) noexcept {
  if (this != &o) {
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    worker_ = std::exchange(o.worker_, nullptr);
  }
  return *this;
}

unsigned UcpWorker::progress() { return ucp_worker_progress(worker_); }

}  // namespace astraflow

namespace astraflow::ucx_detail {

std::array<std::byte, kFrameHeaderBytes> frameHeader(std::uint32_t kind, std::uint64_t length) {
  std::array<std::byte, kFrameHeaderBytes> h{};
  std::memcpy(h.data(), &kind, 4);  // little-endian hosts only (core/byte_io.hpp)
  std::memcpy(h.data() + 4, &length, 8);
  return h;
}

Deadline::Deadline(double timeout_s) {
  // Anything beyond a year is "forever"; it also keeps the duration cast in range.
  if (!std::isfinite(timeout_s) || timeout_s > 3.0e7) return;
  forever_ = false;
  at_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double>(std::max(timeout_s, 0.0)));
}

Deadline Deadline::capped(double timeout_s) const {
  Deadline other(timeout_s);
  if (forever_) return other;
  if (other.forever_ || at_ < other.at_) return *this;
  return other;
}

ucs_status_t finishRequest(ucp_worker_h worker, void* request, const Deadline& deadline, const char* what) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  auto done = [&] { return ucp_request_check_status(request) != UCS_INPROGRESS; };
  if (!progressUntil(worker, deadline, done)) {
    // A cancelled receive completes with UCS_ERR_CANCELED on the next progress; other
    // requests end when their endpoint is closed, which the callers do before this.
    ucp_request_cancel(worker, request);
    constexpr double kCancelGraceS = 0.5;
    if (!progressUntil(worker, Deadline(kCancelGraceS), done)) {
      spdlog::warn("UCX {} request still pending after cancel; released to UCX", what);
      ucp_request_free(request);
      return UCS_ERR_TIMED_OUT;
    }
  }
  const ucs_status_t status = ucp_request_check_status(request);
  ucp_request_free(request);
  return status;
}

std::string sockaddrToString(const sockaddr_storage& addr) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    return fmt::format("{}:{}", ip, ntohs(in->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    return fmt::format("[{}]:{}", ip, ntohs(in6->sin6_port));
  }
  return "?";
}

sockaddr_storage resolveAddress(const std::string& host, std::uint16_t port) {
  sockaddr_storage out{};
  if (host.empty() || host == "0.0.0.0") {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(port);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw UcxError(0, fmt::format("{}: cannot resolve UCX host '{}': {}", processLocation(), host, gai_strerror(rc)));
  }
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (out.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&out)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&out)->sin6_port = htons(port);
  }
  return out;
}

}  // namespace astraflow::ucx_detail
