#pragma once
// RmaRing — the generic bounded MPMC queue over one MPI_Win_allocate window (docs/architecture.md §5).
// The same type carries tasks (dataflow → rollout), trajectories (rollout → dataflow) and
// batches (dataflow → trainer).
//
// Window (on the host rank only; everyone else contributes 0 bytes):
//   [0]  tail ticket counter  (uint64)     claimed by producers
//   [8]  head ticket counter  (uint64)     claimed by remote consumers
//   [64] seq[N]               (uint64)     seq[i] starts at i
//   [64 + 8N] data[N * S]                  slot i owns bytes [i*S, (i+1)*S)
// A record is an 8-byte length followed by its bytes and takes k = ceil((8+len)/S)
// consecutive slots (wrapping around the end). Slot t mod N is free for ticket t when
// seq == t; a record starting at ticket t is readable when seq[t mod N] == t + 1; the
// consumer frees its slots by setting seq = ticket + N.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/win.hpp"

namespace astraflow {

class Comm;

// A record that could never fit the ring: refused before anything is claimed.
class RecordTooLarge : public Error {
 public:
  using Error::Error;
};

struct RingGeometry {
  std::uint64_t slots = 256;
  std::uint64_t slot_bytes = 1024;  // multiple of 8, >= 16
};

struct RingStats {
  std::uint64_t records_pushed = 0;
  std::uint64_t bytes_pushed = 0;
  std::uint64_t records_popped = 0;
  std::uint64_t bytes_popped = 0;
  std::uint64_t push_waits = 0;  // backoff steps producers spent waiting for free slots
};

class RmaRing {
 public:
  // Who consumes: the host alone (reads its own memory with atomic loads + MPI_Win_sync), or
  // any other rank (remote consumers claim records with compare-and-swap on the head).
  enum class Consumer { Host, Remote };

  // Collective over comm; same order on all ranks. `host` is the comm rank that holds the
  // window and must call into MPI regularly (progress() from its idle loop).
  RmaRing(const Comm& comm, int host, RingGeometry geometry, Consumer consumer, std::string name);
  // Collective over the ring's comm (frees the window).
  ~RmaRing();
  RmaRing(const RmaRing&) = delete;
  RmaRing& operator=(const RmaRing&) = delete;

  // Bytes of the window the host allocates for a ring of this geometry.
  static std::uint64_t windowBytes(const RingGeometry& geometry);

  // Largest record the ring can ever hold (slots * slot_bytes - 8).
  std::size_t maxRecordBytes() const;

  // Stores the record, waiting with backoff while the ring is full. Never drops.
  // Throws RecordTooLarge for a record above maxRecordBytes().
  void push(std::span<const std::byte> record);
  // Stores the record only if its slots are free now; false when the ring is full.
  bool tryPush(std::span<const std::byte> record);
  // Takes the oldest readable record into `out`; false when none is ready.
  bool tryPop(std::vector<std::byte>& out);
  // Waits (backoff) for a record until the deadline; false on timeout.
  bool pop(std::vector<std::byte>& out, std::chrono::milliseconds timeout);

  // Slots claimed by producers so far (the tail ticket); tail − slots > head means a
  // producer is waiting for space. One atomic read on the host's window.
  std::uint64_t ticketsClaimed();

  // "head=…, tail=…, seq[head]=…" for diagnostics of a stalled ring (atomic reads).
  std::string describeState();

  // Drives passive-target progress on the host; cheap, call from idle loops.
  void progress() const;

  bool isHost() const { return is_host_; }
  const std::string& name() const { return name_; }
  const RingGeometry& geometry() const { return geo_; }
  const RingStats& stats() const { return stats_; }

 private:
  std::uint64_t slotsFor(std::size_t record_bytes) const;
  void checkSize(std::size_t record_bytes) const;

  // Counter and seq access: MPI atomics (also on the host for tail/head, which remote
  // ranks update too); seq words on the host use local atomics + MPI_Win_sync.
  std::uint64_t fetchAdd(std::uint64_t offset, std::uint64_t add);
  bool compareSwap(std::uint64_t offset, std::uint64_t expected, std::uint64_t desired);
  std::uint64_t readCounter(std::uint64_t offset);
  std::uint64_t readSeq(std::uint64_t ticket);
  bool slotsFree(std::uint64_t ticket, std::uint64_t k);
  void writeRecord(std::uint64_t ticket, std::span<const std::byte> record);
  void readData(std::uint64_t ticket, std::uint64_t skip, std::byte* out, std::uint64_t n);
  void releaseSlots(std::uint64_t ticket, std::uint64_t k);
  bool popLocal(std::vector<std::byte>& out);
  bool popRemote(std::vector<std::byte>& out);

  std::uint64_t seqOffset(std::uint64_t ticket) const;
  std::uint64_t dataOffset(std::uint64_t ticket) const;

  MPI_Comm comm_;  // owned by the caller's Comm, which outlives the ring
  int host_;
  bool is_host_;
  RingGeometry geo_;
  Consumer consumer_;
  std::string name_;
  Win win_;
  RingStats stats_;
  std::vector<std::byte> scratch_;
  std::vector<std::uint64_t> seq_scratch_;
};

}  // namespace astraflow
