#pragma once
// RAII RMA window over memory MPI allocates (MPI_Win_allocate). One object owns one MPI_Win;
// the window's error handler returns errors so ASTRA_MPI_CHECK can report them.
#include <mpi.h>

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

class Win {
 public:
  Win() = default;
  // Collective over comm; same order on all ranks. Each rank contributes `local_bytes`
  // (0 allowed). Before calling MPI the sizes are checked against this node's memory on
  // every rank and agreed with an allreduce, so an impossible window fails on all ranks
  // with a WindowAllocationError instead of hanging some of them.
  static Win allocate(const Comm& comm, std::size_t local_bytes, const char* what);

  ~Win();
  Win(Win&& o) noexcept
      : win_(std::exchange(o.win_, MPI_WIN_NULL)), base_(std::exchange(o.base_, nullptr)),
        bytes_(o.bytes_), locked_(std::exchange(o.locked_, false)) {}
  Win& operator=(Win&& o) noexcept;
  Win(const Win&) = delete;
  Win& operator=(const Win&) = delete;

  // Passive-target epoch to every rank, held for the window's life.
  void lockAll();
  void unlockAll();
  void flush(int target) const;
  // Memory barrier between this process's local loads/stores and RMA to its own memory.
  void sync() const;

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
