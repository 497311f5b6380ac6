// UcxConnection's outbox: frames posted without waiting (ucp_stream_send_nbx, requests kept),
// completed by later progress. It lets a caller that must never stall — the home dataflow rank
// talking to remote sites over a WAN — hand a frame over and go on; it watches the outbox's size
// and age and decides for itself when a peer has fallen too far behind (docs/cross-site.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

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
  f.header = ucx_detail::frameHeader(kind, payload.size());
  f.payload = std::move(payload);
  if (auth) {
    // Sealed now, in posting order, which is the order the frames take on the stream; the tag
    // is sent from the frame's own slot, which stays put until UCX is done with it.
    f.tag = auth->seal(kind, f.payload);
    f.tagged = true;
  }
  f.posted = std::chrono::steady_clock::now();
  outbox_bytes += f.wireBytes();
  const std::span<const std::byte> parts[] = {
      f.header, f.payload, f.tagged ? std::span<const std::byte>(f.tag) : std::span<const std::byte>()};
  ucp_request_param_t params{};
  for (std::size_t i = 0; i < f.requests.size(); ++i) {
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
    ucs_status_t status[3] = {UCS_OK, UCS_OK, UCS_OK};
    bool done = true;
    for (std::size_t i = 0; i < f.requests.size() && done; ++i) done = partDone(f.requests[i], status[i]);
    if (!done) break;
    for (auto& r : f.requests) {
      if (r != nullptr) ucp_request_free(std::exchange(r, nullptr));
    }
    outbox_bytes -= f.wireBytes();
    outbox.pop_front();
    // A send that failed because the peer went away is dropped here, and the receive side
    // reports the closure: what the peer sent before it left (its Bye) is still read first.
    const ucs_status_t* bad =
        std::find_if(std::begin(status), std::end(status), [](ucs_status_t s) { return s != UCS_OK; });
    if (bad != std::end(status) && !failed) {
      markClosed(fmt::format("stream send failed ({})", ucs_status_string(*bad)));
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
