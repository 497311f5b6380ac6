// Win: the RAII MPI_Win_allocate window, allocated only once every rank agrees it fits its node, with the 64-bit
// get / put / atomic accessors the rings and weight stores use; also availableMemoryBytes and humanBytes.
#include "astraflow/comm/win.hpp"

#include <exception>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "astraflow/comm/comm.hpp"

namespace astraflow {

std::uint64_t availableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string humanBytes(std::uint64_t b) {
  if (b >= (1ull << 40)) return fmt::format("{:.1f} TiB", b / double(1ull << 40));
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / double(1ull << 20));
  return fmt::format("{} bytes", b);
}

Win Win::allocate(const Comm& comm, std::size_t local_bytes, const char* what) {
  // Agree on feasibility first: MPI_Win_allocate is collective, and a rank that fails inside
  // it can leave the others waiting forever.
  const std::uint64_t avail = availableMemoryBytes();
  const bool fits = avail == 0 || local_bytes <= avail;
  long long mine[2] = {fits ? -1 : static_cast<long long>(comm.rank()), fits ? 0 : static_cast<long long>(local_bytes)};
  long long worst[2] = {-1, 0};
  ASTRA_MPI_CHECK(MPI_Allreduce(mine, worst, 2, MPI_LONG_LONG, MPI_MAX, comm.raw()));
  if (worst[0] >= 0) {
    throw WindowAllocationError(
        fmt::format("{}: window '{}' needs {} on rank {} of its communicator{}; reduce its size in the config",
                    processLocation(), what, humanBytes(static_cast<std::uint64_t>(worst[1])), worst[0],
                    fits ? "" : fmt::format(", this node has {} available", humanBytes(avail))));
  }

  Win w;
  void* base = nullptr;
  const int rc = MPI_Win_allocate(static_cast<MPI_Aint>(local_bytes), 1, MPI_INFO_NULL, comm.raw(), &base, &w.win_);
  int ok_local = rc == MPI_SUCCESS ? 1 : 0, ok_all = 0;
  ASTRA_MPI_CHECK(MPI_Allreduce(&ok_local, &ok_all, 1, MPI_INT, MPI_MIN, comm.raw()));
  if (!ok_all) {
    char text[MPI_MAX_ERROR_STRING] = "peer failed";
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
    throw WindowAllocationError(fmt::format("{}: MPI_Win_allocate of window '{}' ({}) failed: {}", processLocation(),
                                            what, humanBytes(local_bytes), text));
  }
  ASTRA_MPI_CHECK(MPI_Win_set_errhandler(w.win_, MPI_ERRORS_RETURN));
  w.base_ = static_cast<std::byte*>(base);
  w.bytes_ = local_bytes;
  return w;
}

Win Win::expose(const Comm& comm, std::byte* base, std::size_t bytes, const char* what) {
  Win w;
  const int rc =
      MPI_Win_create(bytes > 0 ? base : nullptr, static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, comm.raw(), &w.win_);
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw WindowAllocationError(fmt::format("{}: MPI_Win_create of window '{}' ({}) failed: {}", processLocation(),
                                            what, humanBytes(bytes), text));
  }
  ASTRA_MPI_CHECK(MPI_Win_set_errhandler(w.win_, MPI_ERRORS_RETURN));
  w.base_ = base;
  w.bytes_ = bytes;
  return w;
}

Win::~Win() {
  if (win_ == MPI_WIN_NULL || MpiEnvironment::finalized()) return;
  // MPI_Win_free is collective: freeing while an error unwinds this rank alone would wait
  // forever for peers that are still running. Leave the window to the abort that follows.
  if (std::uncaught_exceptions() > 0) return;
  if (locked_ && MPI_Win_unlock_all(win_) != MPI_SUCCESS) spdlog::error("MPI_Win_unlock_all failed");
  if (MPI_Win_free(&win_) != MPI_SUCCESS) spdlog::error("MPI_Win_free failed");
}

Win& Win::operator=(Win&& o) noexcept {
  if (this != &o) {
    Win dying(std::move(*this));
    win_ = std::exchange(o.win_, MPI_WIN_NULL);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = o.bytes_;
    locked_ = std::exchange(o.locked_, false);
  }
  return *this;
}

void Win::lockAll() {
  ASTRA_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
  locked_ = true;
}

void Win::unlockAll() {
  if (!locked_) return;
  locked_ = false;
  ASTRA_MPI_CHECK(MPI_Win_unlock_all(win_));
}

void Win::flush(int target) const { ASTRA_MPI_CHECK(MPI_Win_flush(target, win_)); }

void Win::sync() const { ASTRA_MPI_CHECK(MPI_Win_sync(win_)); }

namespace {
constexpr std::uint64_t kRmaPiece = std::uint64_t{1} << 30;  // MPI counts are ints
}  // namespace

void Win::get(int target, std::uint64_t offset, void* out, std::uint64_t n) const {
  auto* at = static_cast<std::byte*>(out);
  for (std::uint64_t done = 0; done < n; done += kRmaPiece) {
    const int count = static_cast<int>(std::min(kRmaPiece, n - done));
    ASTRA_MPI_CHECK(
        MPI_Get(at + done, count, MPI_BYTE, target, static_cast<MPI_Aint>(offset + done), count, MPI_BYTE, win_));
  }
}

RmaRequest Win::rget(int target, std::uint64_t offset, void* out, std::uint64_t n) const {
  if (n > kRmaPiece) throw Error(fmt::format("Win::rget: {} bytes in one request; at most {}", n, kRmaPiece));
  const int count = static_cast<int>(n);
  MPI_Request r = MPI_REQUEST_NULL;
  ASTRA_MPI_CHECK(MPI_Rget(out, count, MPI_BYTE, target, static_cast<MPI_Aint>(offset), count, MPI_BYTE, win_, &r));
  return RmaRequest(r);
}

RmaRequest::~RmaRequest() {
  if (req_ == MPI_REQUEST_NULL || MpiEnvironment::finalized() || std::uncaught_exceptions() > 0) return;
  MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

RmaRequest& RmaRequest::operator=(RmaRequest&& o) noexcept {
  if (this != &o) {
    RmaRequest dying(std::move(*this));
    req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
  }
  return *this;
}

bool RmaRequest::test() {
  if (req_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  ASTRA_MPI_CHECK(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void Win::put(int target, std::uint64_t offset, const void* in, std::uint64_t n) const {
  const auto* at = static_cast<const std::byte*>(in);
  for (std::uint64_t done = 0; done < n; done += kRmaPiece) {
    const int count = static_cast<int>(std::min(kRmaPiece, n - done));
    ASTRA_MPI_CHECK(
        MPI_Put(at + done, count, MPI_BYTE, target, static_cast<MPI_Aint>(offset + done), count, MPI_BYTE, win_));
  }
}

std::uint64_t Win::atomicLoad(int target, std::uint64_t offset) const {
  std::uint64_t value = 0;
  ASTRA_MPI_CHECK(
      MPI_Fetch_and_op(nullptr, &value, MPI_UINT64_T, target, static_cast<MPI_Aint>(offset), MPI_NO_OP, win_));
  flush(target);
  return value;
}

void Win::atomicStore(int target, std::uint64_t offset, std::uint64_t value) const {
  ASTRA_MPI_CHECK(MPI_Accumulate(&value, 1, MPI_UINT64_T, target, static_cast<MPI_Aint>(offset), 1, MPI_UINT64_T,
                                 MPI_REPLACE, win_));
  flush(target);
}

std::uint64_t Win::fetchAdd(int target, std::uint64_t offset, std::uint64_t add) const {
  std::uint64_t old = 0;
  ASTRA_MPI_CHECK(MPI_Fetch_and_op(&add, &old, MPI_UINT64_T, target, static_cast<MPI_Aint>(offset), MPI_SUM, win_));
  flush(target);
  return old;
}

bool Win::compareSwap(int target, std::uint64_t offset, std::uint64_t expected, std::uint64_t desired) const {
  std::uint64_t old = 0;
  ASTRA_MPI_CHECK(
      MPI_Compare_and_swap(&desired, &expected, &old, MPI_UINT64_T, target, static_cast<MPI_Aint>(offset), win_));
  flush(target);
  return old == expected;
}

}  // namespace astraflow
