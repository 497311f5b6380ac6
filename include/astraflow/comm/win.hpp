#pragma once
// RAII RMA window over memory MPI allocates (MPI_Win_allocate). One object owns one MPI_Win;
// the window's error handler returns errors so ASTRA_MPI_CHECK can report them.
#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "astraflow/comm/mpi.hpp"

namespace astraflow {

class Comm;

// Window allocation was refused on some rank (too large for its node, or MPI could not
// allocate); thrown on every rank of the communicator.
class WindowAllocationError : public Error {
 public:
  using Error::Error;
};

// MemAvailable of this node in bytes (from /proc/meminfo); 0 when unknown.
std::uint64_t availableMemoryBytes();
std::string humanBytes(std::uint64_t bytes);

// One request-based RMA operation (MPI_Rget). Completion means the bytes are in the caller's
// buffer, which must live until then; a request not yet complete when dropped is waited for,
// except while an error unwinds (the peer may be gone: the abort that follows ends it).
class RmaRequest {
 public:
  RmaRequest() = default;
  explicit RmaRequest(MPI_Request r) : req_(r) {}
  ~RmaRequest();
  RmaRequest(RmaRequest&& o) noexcept : req_(std::exchange(o.req_, MPI_REQUEST_NULL)) {}
  RmaRequest& operator=(RmaRequest&& o) noexcept;
  RmaRequest(const RmaRequest&) = delete;
  RmaRequest& operator=(const RmaRequest&) = delete;
  // Lets MPI progress; true once the operation has completed (and from then on).
  bool test();
  // Forgets the request without waiting (after it failed, or while an error unwinds).
  void abandon() noexcept { req_ = MPI_REQUEST_NULL; }

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
};

class Win {
 public:
  Win() = default;
  // Collective over comm; same order on all ranks. Each rank contributes `local_bytes`
  // (0 allowed). Before calling MPI the sizes are checked against this node's memory on
  // every rank and agreed with an allreduce, so an impossible window fails on all ranks
  // with a WindowAllocationError instead of hanging some of them.
  static Win allocate(const Comm& comm, std::size_t local_bytes, const char* what);
  // Collective over comm: a window over memory the caller owns and keeps mapped for the
  // window's life (MPI_Win_create; `bytes` 0 with a null `base` exposes nothing). Used to let
  // other nodes read memory that is already shared on this one (a node's weight copy).
  static Win expose(const Comm& comm, std::byte* base, std::size_t bytes, const char* what);

  ~Win();
  Win(Win&& o) noexcept
      : win_(std::exchange(o.win_, MPI_WIN_NULL)),
        base_(std::exchange(o.base_, nullptr)),
        bytes_(o.bytes_),
        locked_(std::exchange(o.locked_, false)) {}
  Win& operator=(Win&& o) noexcept;
  Win(const Win&) = delete;
  Win& operator=(const Win&) = delete;

  // Passive-target epoch to every rank, held for the window's life.
  void lockAll();
  void unlockAll();
  void flush(int target) const;
  // Memory barrier between this process's local loads/stores and RMA to its own memory.
  void sync() const;

  // 64-bit words of the window on rank `target`, through MPI atomics, each flushed before it
  // returns (so the operation is complete at the target). The one implementation of the ring's
  // and the weight store's counters and sequence words: osc sm serialises its atomics with a
  // lock that plain loads/stores bypass, so even the host reads its own words this way.
  std::uint64_t atomicLoad(int target, std::uint64_t offset) const;
  void atomicStore(int target, std::uint64_t offset, std::uint64_t value) const;
  std::uint64_t fetchAdd(int target, std::uint64_t offset, std::uint64_t add) const;  // returns the old value
  bool compareSwap(int target, std::uint64_t offset, std::uint64_t expected, std::uint64_t desired) const;
  // `n` bytes of the window on `target` from `offset` into `out` (get) or from `in` (put), in
  // calls of at most 1 GiB (MPI counts are ints). Not flushed: flush(target) completes them.
  void get(int target, std::uint64_t offset, void* out, std::uint64_t n) const;
  // The same as one request the caller can poll and give up waiting on (at most 1 GiB): for
  // reads from a target that may not take part for a while (a transport that needs it to).
  RmaRequest rget(int target, std::uint64_t offset, void* out, std::uint64_t n) const;
  void put(int target, std::uint64_t offset, const void* in, std::uint64_t n) const;
  // A word of this rank's own window, for the host's local-only words (never touched by RMA).
  std::atomic_ref<std::uint64_t> localWord(std::uint64_t offset) const {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base_ + offset));
  }

  bool valid() const { return win_ != MPI_WIN_NULL; }
  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  MPI_Win raw() const { return win_; }

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool locked_ = false;
};

}  // namespace astraflow
