// RmaRing: the bounded MPMC queue over one MPI window (layout in rma_ring.hpp), with ticket claims, records over
// several slots, host-local and remote pops; it carries tasks, trajectories and batches between the roles.
#include "astraflow/comm/rma_ring.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"

namespace astraflow {

namespace {

constexpr std::uint64_t kTailOffset = 0;
constexpr std::uint64_t kHeadOffset = 8;
constexpr std::uint64_t kHeaderBytes = 64;
constexpr std::uint64_t kLengthBytes = 8;
// A remote consumer first reads this much of a record's first slot: enough for most tasks
// and trajectories in one round trip without pulling a whole large slot for a small record.
constexpr std::uint64_t kProbeBytes = 512;
// Without hardware RDMA atomics, other ranks' operations on the host's window complete only
// while the host calls into MPI (docs/architecture.md §5), so a waiting host naps briefly; a waiting
// remote rank delays only itself and may sleep longer.
constexpr std::chrono::microseconds kHostMaxNap{50};
constexpr std::uint32_t kHostYields = 64;  // osc ucx here: 4 yields -> 4k rec/s, 64 -> 17k (bench_ring)
constexpr std::chrono::microseconds kRemoteMaxNap{1000};

}  // namespace

RmaRing::RmaRing(const Comm& comm, int host, RingGeometry geometry, Consumer consumer, std::string name)
    : comm_(comm.raw()),
      host_(host),
      is_host_(comm.rank() == host),
      geo_(geometry),
      consumer_(consumer),
      name_(std::move(name)) {
  if (geo_.slots < 2 || geo_.slot_bytes < 16 || geo_.slot_bytes % 8 != 0) {
    throw Error(fmt::format("ring '{}': {} slots of {} bytes; allowed: >= 2 slots of a multiple of 8 bytes >= 16",
                            name_, geo_.slots, geo_.slot_bytes));
  }
  win_ = Win::allocate(comm, is_host_ ? windowBytes(geo_) : 0, name_.c_str());
  win_.lockAll();
  if (is_host_) {
    // Initialised before any peer may touch the window (the barrier below).
    std::memset(win_.base(), 0, kHeaderBytes);
    for (std::uint64_t i = 0; i < geo_.slots; ++i) win_.localWord(seqOffset(i)).store(i);
    win_.sync();
  }
  // Nobody touches the ring before the host has initialised it.
  comm.barrier();
}

RmaRing::~RmaRing() = default;

std::uint64_t RmaRing::windowBytes(const RingGeometry& g) {
  return kHeaderBytes + 8 * g.slots + g.slots * g.slot_bytes;
}

std::size_t RmaRing::maxRecordBytes() const {
  // MPI counts are ints: one record moves in at most two calls of < 2 GiB.
  constexpr std::uint64_t kMpiCountLimit = 0x7fffffffull - kLengthBytes;
  return std::min(geo_.slots * geo_.slot_bytes - kLengthBytes, kMpiCountLimit);
}

std::uint64_t RmaRing::seqOffset(std::uint64_t ticket) const { return kHeaderBytes + 8 * (ticket % geo_.slots); }

std::uint64_t RmaRing::dataOffset(std::uint64_t ticket) const {
  return kHeaderBytes + 8 * geo_.slots + (ticket % geo_.slots) * geo_.slot_bytes;
}

std::uint64_t RmaRing::slotsFor(std::size_t record_bytes) const {
  return (kLengthBytes + record_bytes + geo_.slot_bytes - 1) / geo_.slot_bytes;
}

void RmaRing::checkSize(std::size_t record_bytes) const {
  if (record_bytes > maxRecordBytes()) {
    throw RecordTooLarge(
        fmt::format("ring '{}': a record of {} bytes can never fit ({} slots x {} bytes hold at "
                    "most {} bytes); raise the ring's slots or slot_bytes",
                    name_, record_bytes, geo_.slots, geo_.slot_bytes, maxRecordBytes()));
  }
}

std::uint64_t RmaRing::ticketsClaimed() { return readCounter(kTailOffset); }

std::string RmaRing::describeState() {
  const std::uint64_t head =
      consumer_ == Consumer::Host && is_host_ ? win_.localWord(kHeadOffset).load() : readCounter(kHeadOffset);
  const std::uint64_t tail = readCounter(kTailOffset);
  std::string seqs;
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>(geo_.slots, 16); ++i) {
    seqs += fmt::format("{}{}", i ? "," : "", readSeq(head + i));
  }
  return fmt::format("ring '{}': head={} tail={} seq[head..]={}", name_, head, tail, seqs);
}

void RmaRing::progress() const {
  int flag = 0;
  ASTRA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE));
}

std::uint64_t RmaRing::fetchAdd(std::uint64_t offset, std::uint64_t add) { return win_.fetchAdd(host_, offset, add); }

bool RmaRing::compareSwap(std::uint64_t offset, std::uint64_t expected, std::uint64_t desired) {
  return win_.compareSwap(host_, offset, expected, desired);
}

std::uint64_t RmaRing::readCounter(std::uint64_t offset) { return win_.atomicLoad(host_, offset); }

// Seq words are read and written only through MPI atomics, also by the host on its own
// window: osc sm serialises its atomics with a lock that plain loads/stores bypass, and mixing
// the two lost a slot release under load (a hang in 1 of ~40 runs of the ring test at 2 ranks).
std::uint64_t RmaRing::readSeq(std::uint64_t ticket) { return readCounter(seqOffset(ticket)); }

// Reads the seq words of slots ticket .. ticket+k-1 (in at most two atomic reads: the range
// wraps at most once) and checks each is free for its ticket.
bool RmaRing::slotsFree(std::uint64_t ticket, std::uint64_t k) {
  seq_scratch_.resize(k);
  for (std::uint64_t done = 0; done < k;) {
    const std::uint64_t run = std::min(k - done, geo_.slots - (ticket + done) % geo_.slots);
    ASTRA_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_UINT64_T, seq_scratch_.data() + done, static_cast<int>(run),
                                       MPI_UINT64_T, host_, static_cast<MPI_Aint>(seqOffset(ticket + done)),
                                       static_cast<int>(run), MPI_UINT64_T, MPI_NO_OP, win_.raw()));
    done += run;
  }
  win_.flush(host_);
  for (std::uint64_t i = 0; i < k; ++i) {
    if (seq_scratch_[i] != ticket + i) return false;
  }
  return true;
}

// Copies the length word and the record into the slots of `ticket`, then publishes it.
void RmaRing::writeRecord(std::uint64_t ticket, std::span<const std::byte> record) {
  const std::uint64_t len = record.size();
  const std::uint64_t total = kLengthBytes + len;
  scratch_.resize(total);
  std::memcpy(scratch_.data(), &len, kLengthBytes);
  if (len) std::memcpy(scratch_.data() + kLengthBytes, record.data(), len);

  // The record's bytes are contiguous in the window unless they wrap past the last slot.
  const std::uint64_t first_slot = ticket % geo_.slots;
  const std::uint64_t until_end = (geo_.slots - first_slot) * geo_.slot_bytes;
  const std::uint64_t part1 = std::min(total, until_end);
  const std::uint64_t data_start = kHeaderBytes + 8 * geo_.slots;
  if (is_host_) {
    std::memcpy(win_.base() + dataOffset(ticket), scratch_.data(), part1);
    if (total > part1) std::memcpy(win_.base() + data_start, scratch_.data() + part1, total - part1);
    win_.sync();
    const std::uint64_t published = ticket + 1;
    ASTRA_MPI_CHECK(MPI_Accumulate(&published, 1, MPI_UINT64_T, host_, static_cast<MPI_Aint>(seqOffset(ticket)), 1,
                                   MPI_UINT64_T, MPI_REPLACE, win_.raw()));
    win_.flush(host_);
  } else {
    ASTRA_MPI_CHECK(MPI_Put(scratch_.data(), static_cast<int>(part1), MPI_BYTE, host_,
                            static_cast<MPI_Aint>(dataOffset(ticket)), static_cast<int>(part1), MPI_BYTE, win_.raw()));
    if (total > part1) {
      ASTRA_MPI_CHECK(MPI_Put(scratch_.data() + part1, static_cast<int>(total - part1), MPI_BYTE, host_,
                              static_cast<MPI_Aint>(data_start), static_cast<int>(total - part1), MPI_BYTE,
                              win_.raw()));
    }
    // The data must be complete at the host before the seq word says it is there.
    win_.flush(host_);
    const std::uint64_t published = ticket + 1;
    ASTRA_MPI_CHECK(MPI_Accumulate(&published, 1, MPI_UINT64_T, host_, static_cast<MPI_Aint>(seqOffset(ticket)), 1,
                                   MPI_UINT64_T, MPI_REPLACE, win_.raw()));
    win_.flush(host_);
  }
  stats_.records_pushed++;
  stats_.bytes_pushed += len;
}

void RmaRing::push(std::span<const std::byte> record) {
  checkSize(record.size());
  const std::uint64_t k = slotsFor(record.size());
  const std::uint64_t ticket = fetchAdd(kTailOffset, k);
  Backoff backoff(is_host_ ? kHostMaxNap : kRemoteMaxNap, is_host_ ? kHostYields : 4);
  while (!slotsFree(ticket, k)) {
    if (is_host_) progress();
    backoff.wait();
    stats_.push_waits++;
  }
  writeRecord(ticket, record);
}

bool RmaRing::tryPush(std::span<const std::byte> record) {
  checkSize(record.size());
  const std::uint64_t k = slotsFor(record.size());
  const std::uint64_t ticket = readCounter(kTailOffset);
  if (!slotsFree(ticket, k)) return false;
  if (!compareSwap(kTailOffset, ticket, ticket + k)) return false;
  writeRecord(ticket, record);
  return true;
}

// Reads n bytes of the record at `ticket`, starting `skip` bytes into it (length word
// included), wrapping around the end of the data region.
void RmaRing::readData(std::uint64_t ticket, std::uint64_t skip, std::byte* out, std::uint64_t n) {
  const std::uint64_t data_bytes = geo_.slots * geo_.slot_bytes;
  const std::uint64_t data_start = kHeaderBytes + 8 * geo_.slots;
  std::uint64_t pos = ((ticket % geo_.slots) * geo_.slot_bytes + skip) % data_bytes;
  while (n > 0) {
    const std::uint64_t chunk = std::min(n, data_bytes - pos);
    if (is_host_) {
      std::memcpy(out, win_.base() + data_start + pos, chunk);
    } else {
      ASTRA_MPI_CHECK(MPI_Get(out, static_cast<int>(chunk), MPI_BYTE, host_, static_cast<MPI_Aint>(data_start + pos),
                              static_cast<int>(chunk), MPI_BYTE, win_.raw()));
    }
    out += chunk;
    n -= chunk;
    pos = 0;
  }
  if (!is_host_) win_.flush(host_);
}

// Frees the k slots of a consumed record: seq = ticket + N for each, in at most two
// element-wise atomic writes (one per contiguous run).
void RmaRing::releaseSlots(std::uint64_t ticket, std::uint64_t k) {
  if (is_host_) win_.sync();  // our local copy-out is complete before the slots are handed back
  seq_scratch_.resize(k);
  for (std::uint64_t i = 0; i < k; ++i) seq_scratch_[i] = ticket + i + geo_.slots;
  for (std::uint64_t done = 0; done < k;) {
    const std::uint64_t run = std::min(k - done, geo_.slots - (ticket + done) % geo_.slots);
    ASTRA_MPI_CHECK(MPI_Accumulate(seq_scratch_.data() + done, static_cast<int>(run), MPI_UINT64_T, host_,
                                   static_cast<MPI_Aint>(seqOffset(ticket + done)), static_cast<int>(run), MPI_UINT64_T,
                                   MPI_REPLACE, win_.raw()));
    done += run;
  }
  win_.flush(host_);
}

bool RmaRing::tryPop(std::vector<std::byte>& out) {
  if (consumer_ == Consumer::Host && !is_host_) {
    throw Error(fmt::format("ring '{}' is consumed by its host only; rank {} tried to pop", name_, host_));
  }
  return consumer_ == Consumer::Host ? popLocal(out) : popRemote(out);
}

bool RmaRing::pop(std::vector<std::byte>& out, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff backoff(is_host_ ? kHostMaxNap : kRemoteMaxNap, is_host_ ? kHostYields : 4);
  while (!tryPop(out)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (is_host_) progress();
    backoff.wait();
  }
  return true;
}

// The host is the only consumer: its head is a plain local word nobody else writes.
bool RmaRing::popLocal(std::vector<std::byte>& out) {
  auto head = win_.localWord(kHeadOffset);
  const std::uint64_t h = head.load(std::memory_order_relaxed);
  if (readSeq(h) != h + 1) return false;
  std::uint64_t len = 0;
  std::memcpy(&len, win_.base() + dataOffset(h), kLengthBytes);
  if (len > maxRecordBytes()) {
    throw Error(fmt::format("ring '{}': corrupt record length {} at ticket {}", name_, len, h));
  }
  out.resize(len);
  readData(h, kLengthBytes, out.data(), len);
  const std::uint64_t k = slotsFor(len);
  releaseSlots(h, k);
  head.store(h + k, std::memory_order_relaxed);
  stats_.records_popped++;
  stats_.bytes_popped += len;
  return true;
}

// Remote consumers race for the head: read it, check the record there is published, read
// its first bytes (stable while unclaimed), then claim it with compare-and-swap.
bool RmaRing::popRemote(std::vector<std::byte>& out) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::uint64_t h = readCounter(kHeadOffset);
    if (readSeq(h) != h + 1) return false;
    const std::uint64_t probe = std::min(kProbeBytes, geo_.slot_bytes);
    scratch_.resize(probe);
    readData(h, 0, scratch_.data(), probe);
    std::uint64_t len = 0;
    std::memcpy(&len, scratch_.data(), kLengthBytes);
    if (len > maxRecordBytes()) {
      // Another consumer may have claimed and freed h since we read it; check before failing.
      if (readCounter(kHeadOffset) != h) continue;
      throw Error(fmt::format("ring '{}': corrupt record length {} at ticket {}", name_, len, h));
    }
    const std::uint64_t k = slotsFor(len);
    if (!compareSwap(kHeadOffset, h, h + k)) continue;
    out.resize(len);
    const std::uint64_t have = std::min<std::uint64_t>(len, probe - kLengthBytes);
    std::memcpy(out.data(), scratch_.data() + kLengthBytes, have);
    if (len > have) readData(h, kLengthBytes + have, out.data() + have, len - have);
    releaseSlots(h, k);
    stats_.records_popped++;
    stats_.bytes_popped += len;
    return true;
  }
  return false;
}

}  // namespace astraflow
