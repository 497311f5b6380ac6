#pragma once
// RAII node-shared memory: one object owns one POSIX shared-memory mapping that every rank of a
// node communicator maps. Rank 0 of the communicator (the node's leader) creates and sizes the
// segment, the others map it by name, and the name is unlinked as soon as all have it, so
// nothing is left in /dev/shm however the ranks end (the memory goes with the last mapping).
// POSIX rather than MPI_Win_allocate_shared: it works whichever one-sided component MPI was
// started with (osc ucx has no shared windows), and unmapping is local, never a collective a
// dead peer could hang. Read and written with plain loads and stores, and std::atomic_ref for
// the words ranks coordinate on.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace astraflow {

class Comm;

class SharedWin {
 public:
  SharedWin() = default;
  // Collective over `node` (a communicator whose ranks share memory: splitIntoNodes). The
  // leader reserves every page up front (posix_fallocate), so a node without the memory fails
  // here, on every rank of the node, with a WindowAllocationError (comm/win.hpp) naming `what`,
  // not later with SIGBUS. The memory starts zeroed.
  static SharedWin allocate(const Comm& node, std::size_t bytes, const char* what);

  ~SharedWin();
  SharedWin(SharedWin&& o) noexcept : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  SharedWin& operator=(SharedWin&& o) noexcept;
  SharedWin(const SharedWin&) = delete;
  SharedWin& operator=(const SharedWin&) = delete;

  bool valid() const { return base_ != nullptr; }
  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  // A 64-bit word of the shared memory, for ranks of the node that coordinate on it (lock-free
  // 64-bit atomics on x86-64 and AArch64 are address-free, so they work across processes).
  std::atomic_ref<std::uint64_t> word(std::uint64_t offset) const {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base_ + offset));
  }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
};

// The ranks of `comm` that share a node's weights: the ranks that share memory
// (Comm::splitByNode), split further into groups of ASTRAFLOW_NODE_RANKS consecutive ranks when
// that variable is set ("pretend nodes": tests run the per-node paths with several nodes on one
// machine). Threads and GPU slots still follow the real node. Collective over `comm`.
Comm splitIntoNodes(const Comm& comm);
// ASTRAFLOW_NODE_RANKS, or 0 when unset; an Error when it is not a positive integer.
int pretendNodeRanks();

}  // namespace astraflow
