// UcxConnection's outbox: frames posted without waiting (ucp_stream_send_nbx, requests kept),
// completed by later progress. It lets a caller that must never stall — the home dataflow rank
// talking to remote sites over a WAN — hand a frame over and go on; it watches the outbox's size
// and age and decides for itself when a peer has fallen too far behind (docs/cross-site.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "comm/ucx_detail.hpp"

namespace astraflow {

using ucx_detail::Deadline;

namespace {

// A part of a frame that completed (or was never posted) needs nothing more.
bool partDone(void* request, ucs_status_t& status) {
  if (request == nullptr) return true;
  status = ucp_request_check_status(request);
  return status != UCS_INPROGRESS;
}

}  // namespace

void UcxConnection::Impl::post(std::uint32_t kind, std::vector<std::byte> payload) {
  throwIfClosed();
  if (failed) {
    markClosed(fmt::format("the peer closed or failed ({})", ucs_status_string(fail_status)));
    throwClosed();
  }
  QueuedFrame& f = outbox.emplace_back();
  const std::uint64_t length = payload.size();
  std::memcpy(f.header.data(), &kind, 4);  // the frame header: kind u32, length u64 (little-endian)
  std::memcpy(f.header.data() + 4, &length, 8);
  f.payload = std::move(payload);
  f.posted = std::chrono::steady_clock::now();
  outbox_bytes += f.header.size() + f.payload.size();
  const std::span<const std::byte> parts[] = {f.header, f.payload};
  ucp_request_param_t params{};
  for (std::size_t i = 0; i < 2; ++i) {
    if (parts[i].empty()) continue;
    void* request = ucp_stream_send_nbx(ep, parts[i].data(), parts[i].size(), &params);
    if (UCS_PTR_IS_ERR(request)) {
      // The stream may hold part of this frame: it is unusable from here on.
      markClosed(fmt::format("stream send failed ({})", ucs_status_string(UCS_PTR_STATUS(request))));
      throwClosed();
    }
    f.requests[i] = request;
  }
  progressOutbox();
}

void UcxConnection::Impl::progressOutbox() {
  if (closed) return;
  ucp_worker_progress(worker);
  while (!outbox.empty()) {
    QueuedFrame& f = outbox.front();
    ucs_status_t status[2] = {UCS_OK, UCS_OK};
    if (!partDone(f.requests[0], status[0]) || !partDone(f.requests[1], status[1])) break;
    for (auto& r : f.requests) {
      if (r != nullptr) ucp_request_free(std::exchange(r, nullptr));
    }
    outbox_bytes -= f.header.size() + f.payload.size();
    outbox.pop_front();
    // A send that failed because the peer went away is dropped here, and the receive side
    // reports the closure: what the peer sent before it left (its Bye) is still read first.
    if ((status[0] != UCS_OK || status[1] != UCS_OK) && !failed) {
      markClosed(
          fmt::format("stream send failed ({})", ucs_status_string(status[0] != UCS_OK ? status[0] : status[1])));
      return;
    }
  }
}

void UcxConnection::Impl::releaseOutbox() {
  for (auto& f : outbox) {
    for (auto& r : f.requests) {
      if (r != nullptr) {
        ucx_detail::finishRequest(worker, std::exchange(r, nullptr), Deadline(options.close_timeout_s), "queued send");
      }
    }
  }
  outbox.clear();
  outbox_bytes = 0;
}

// ---- public face ------------------------------------------------------------------------

void UcxConnection::post(std::uint32_t kind, std::vector<std::byte> payload) {
  if (!impl_) throw UcxConnectionClosed(0, fmt::format("{}: UCX connection is empty", processLocation()));
  impl_->checkOutgoing(kind, payload.size());
  impl_->post(kind, std::move(payload));
}

void UcxConnection::progressSends() {
  if (impl_) impl_->progressOutbox();
}

std::uint64_t UcxConnection::queuedBytes() const { return impl_ ? impl_->outbox_bytes : 0; }

std::size_t UcxConnection::queuedFrames() const { return impl_ ? impl_->outbox.size() : 0; }

double UcxConnection::oldestQueuedSeconds() const {
  if (!impl_ || impl_->outbox.empty()) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->outbox.front().posted).count();
}

}  // namespace astraflow
