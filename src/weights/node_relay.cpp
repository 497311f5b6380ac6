// Full weight versions relayed between nodes: the tree, the window over each node's copy and
// the checked copy from the nearest ancestor that has the version (node_relay.hpp).
#include "node_relay.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/shared_win.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/weights/delta_codec.hpp"

namespace astraflow {

using namespace node_layout;

namespace {
constexpr int kMaxOvertaken = 3;          // copies an ancestor may spoil by moving on before the store serves
constexpr std::uint32_t kSpinTests = 64;  // a read's tests (each with a yield) before its backoff sleeps
}  // namespace

NodeNumbering numberNodes(const Comm& readers, const Comm& node) {
  const bool first = node.rank() == 0;
  const Comm firsts = readers.split(first ? 0 : -1, readers.rank());
  NodeNumbering n;
  n.index = node.broadcastValue(0, firsts.valid() ? firsts.rank() : 0);
  n.nodes = node.broadcastValue(0, firsts.valid() ? firsts.size() : 0);
  const std::int32_t mine[2] = {n.index, first ? readers.rank() : -1};
  const auto all = readers.allgatherBytes(std::as_bytes(std::span(mine)));
  n.first_rank.assign(static_cast<std::size_t>(n.nodes), -1);
  for (std::size_t at = 0; at + sizeof(mine) <= all.size(); at += sizeof(mine)) {
    std::int32_t e[2];
    std::memcpy(e, all.data() + at, sizeof(e));
    if (e[1] >= 0) n.first_rank[static_cast<std::size_t>(e[0])] = e[1];
  }
  return n;
}

NodeRelay::NodeRelay(Comm readers_comm, const Comm& node, NodeNumbering nodes, const SharedWin& segment,
                     std::uint64_t capacity, NodeRelayOptions options, std::string policy)
    : readers_(std::move(readers_comm)),
      policy_(std::move(policy)),
      options_(options),
      stride_(pageAligned(capacity)),
      index_(nodes.index),
      nodes_(nodes.nodes) {
  if (options_.fanout <= 0 || nodes_ <= 1) return;  // every node pulls from the store
  if (!expose(node.rank() == 0 ? &segment : nullptr)) {
    if (node.rank() == 0) segment.word(kDeltaRingBytes).store(0);  // no child reads it: nothing kept
    return;
  }
  serves_ = node.rank() == 0 && nodes.hasChildren(options_.fanout);
  for (int j = index_; j > 0;) {
    j = (j - 1) / options_.fanout;
    ancestors_.push_back({nodes.first_rank[static_cast<std::size_t>(j)]});
  }
}

bool NodeRelay::expose(const SharedWin* segment) {
  // MPI_Win_create needs a one-sided component that takes memory it did not allocate: osc ucx
  // does, osc sm (mpirun --mca osc sm) does not. Without it every node pulls from the store.
  const std::string what = "node relay:" + policy_;
  std::string error;
  try {
    win_ = Win::expose(readers_, segment ? segment->base() : nullptr, segment ? segment->bytes() : 0, what.c_str());
  } catch (const Error& e) {
    error = e.what();
  }
  const auto failed = readers_.allreduceMax(std::uint64_t{error.empty() ? 0u : 1u});
  // Made on some ranks only: every rank stops here (a window that exists on some ranks only
  // would hang the collectives that follow).
  if (failed && readers_.allreduceMax(std::uint64_t{win_.valid() ? 1u : 0u}))
    throw Error(fmt::format("weights:{}: the node relay's window was created on some rollout ranks only ({})", policy_,
                            error.empty() ? "another rank failed" : error));
  if (failed) {
    if (readers_.rank() == 0)
      spdlog::warn("weights:{}: full versions are not relayed between nodes, each node pulls them from the store ({})",
                   policy_, error);
    return false;
  }
  win_.lockAll();
  return true;
}

NodeRelay::~NodeRelay() {
  // While an error unwinds, reads still in flight are not waited for (their ranks may be gone):
  // their buffers are left to the process's end, so that a late answer lands in live memory.
  if (std::uncaught_exceptions() == 0) return;
  for (auto& u : unanswered_) {
    u.request.abandon();
    new std::vector<std::byte>(std::move(u.buffer));  // NOLINT: leaked on purpose
  }
}

void NodeRelay::serve() const {
  if (serves_) readers_.driveProgress();
}

bool NodeRelay::read(Ancestor& a, std::uint64_t offset, void* out, std::uint64_t n, Clock::time_point by) {
  std::vector<std::byte> buffer = std::move(bounce_);
  buffer.resize(n);
  RmaRequest request = win_.rget(a.rank, offset, buffer.data(), n);
  // Polled, each test letting MPI progress (what answers the read where the transport needs
  // both sides), yielding, then with backoff sleeps: the target may be in a long call. More
  // yields were faster at 4 pretend nodes here and slower at 16 (130 processes on 2 cores).
  Backoff backoff(std::chrono::microseconds(50), kSpinTests);
  while (!request.test()) {
    if (Clock::now() >= by) {
      // Its rank is inside a long call and the transport needs it to answer: pass it over until
      // the read completes (a moved vector keeps its bytes where the read writes them).
      a.unanswered++;
      stats_.unanswered++;
      unanswered_.push_back({static_cast<std::size_t>(&a - ancestors_.data()), std::move(buffer), std::move(request)});
      return false;
    }
    backoff.wait();
  }
  std::memcpy(out, buffer.data(), n);
  bounce_ = std::move(buffer);
  return true;
}

void NodeRelay::reapUnanswered() {
  std::erase_if(unanswered_, [this](Unanswered& u) {
    Ancestor& a = ancestors_[u.ancestor];
    try {
      if (!u.request.test()) return false;
    } catch (const Error& e) {
      // The read failed (its rank is gone): that ancestor is passed over from now on, and the
      // request is dropped without a wait (its buffer with it: MPI is done with both).
      u.request.abandon();
      if (!a.lost) stats_.ancestors_lost++;
      a.lost = true;
      spdlog::warn("weights:{}: node {}'s read of rank {} failed ({}); passing that ancestor over", policy_, index_,
                   a.rank, e.what());
    }
    a.unanswered--;
    return true;
  });
}

std::optional<NodeRelay::Header> NodeRelay::readHeader(Ancestor& a, Clock::time_point by) {
  std::uint64_t w[kHeaderEnd / 8];
  if (!read(a, 0, w, sizeof(w), by)) return std::nullopt;
  Header h{w[kWriter / 8],
           w[kDataOffset / 8],
           w[kDeltaRing / 8],
           w[kDeltaRingBytes / 8],
           w[kDeltaSeq / 8],
           static_cast<std::int64_t>(w[kDeltaNewest / 8]),
           {},
           {},
           {}};
  for (std::uint64_t s = 0; s < kMaxSlots; ++s) {
    const std::uint64_t* r = w + (kSlots + kSlotRecordBytes * s) / 8;
    h.slots[s] = {static_cast<std::int64_t>(r[0]), r[1], r[2], r[3]};
    const std::uint64_t* p = w + (kProgress + kProgressBytes * s) / 8;
    h.arriving[s] = {static_cast<std::int64_t>(p[0]), p[1], p[2], p[3]};
  }
  for (std::uint64_t i = 0; i < kDeltaEntries; ++i) {
    const std::uint64_t* e = w + (kDeltaTable + kDeltaEntryBytes * i) / 8;
    h.entries[i] = {static_cast<std::int64_t>(e[0]), e[1], e[2]};
  }
  return h;
}

bool NodeRelay::Header::receivingFull() const {
  return std::any_of(std::begin(arriving), std::end(arriving), [](const Arriving& in) { return in.version >= 0; });
}

NodeRelay::Clock::time_point NodeRelay::answerBy() const {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.answer_s));
}

void NodeRelay::servedBy(const Ancestor& a, std::uint64_t copies) {
  stats_.last_source = a.rank;
  if (&a != &ancestors_.front()) stats_.further_up += copies;
}

void NodeRelay::passOver(Ancestor& a, const Error& e) {
  // An ancestor whose first rank is gone (or whose window fails otherwise): the next one up, or
  // the store, serves this node from now on.
  a.lost = true;
  stats_.ancestors_lost++;
  spdlog::warn(
      "weights:{}: node {} cannot read its ancestor's copy (rank {} of the link's rollout ranks: {}); passing it "
      "over",
      policy_, index_, a.rank, e.what());
}

std::optional<NodeRelay::Source> NodeRelay::sourceIn(const Header& h, std::int64_t version, std::uint64_t bytes) {
  std::optional<Source> best;
  for (std::uint64_t s = 0; s < kMaxSlots; ++s) {
    const auto& r = h.slots[s];
    const auto& in = h.arriving[s];
    if (r.version >= version && r.bytes == bytes && (!best || r.version > best->version))
      best = Source{s, r.version, r.hash};
    if (in.version >= version && in.bytes == bytes && (!best || in.version > best->version))
      best = Source{s, in.version, in.hash};
  }
  return best;
}

std::optional<RelayedVersion> NodeRelay::fill(std::int64_t version, std::uint64_t bytes, std::span<std::byte> into,
                                              SlotObserver* observer) {
  reapUnanswered();
  for (auto& a : ancestors_) {
    if (a.lost || a.unanswered > 0) continue;
    try {
      if (auto got = fillFrom(a, version, bytes, into, observer)) return got;
    } catch (const Error& e) {
      passOver(a, e);
    }
  }
  return std::nullopt;
}

std::optional<RelayedVersion> NodeRelay::fillFrom(Ancestor& a, std::int64_t version, std::uint64_t bytes,
                                                  std::span<std::byte> into, SlotObserver* observer) {
  const auto patience = std::chrono::duration<double>(options_.patience_s);
  auto deadline = std::chrono::steady_clock::now() + patience;
  Backoff backoff;
  bool waited = false;
  int overtaken = 0;
  while (true) {
    const auto read = readHeader(a, answerBy());
    if (!read) return std::nullopt;
    const Header& h = *read;
    if (h.writer != a.stuck_writer) a.stuck_writer = 0;  // that writer let go: a new one is waited for again
    if (const auto from = sourceIn(h, version, bytes)) {
      switch (copy(a, *from, h.data + from->slot * stride_, bytes, into, observer)) {
        case Copy::Done: break;
        case Copy::Unanswered: return std::nullopt;
        case Copy::Stalled:
          a.stuck_writer = h.writer;
          stats_.timeouts++;
          return std::nullopt;
        case Copy::Gone:
          // The ancestor dropped it or rewrote its slot midway (a node of one slot rewrites it
          // for every version): look again, but not for ever behind an ancestor that moves on
          // faster than it can be copied from.
          stats_.torn_retries++;
          if (++overtaken == kMaxOvertaken) return std::nullopt;
          backoff.wait();
          continue;
      }
      if (weightsHash(into.first(bytes)) != from->hash) {
        stats_.rejected++;
        spdlog::warn("weights:{}: node {}'s copy of v{} from rank {} fails its checksum; asking further up", policy_,
                     index_, from->version, a.rank);
        return std::nullopt;
      }
      stats_.relayed++;
      stats_.bytes += bytes;
      servedBy(a, 1);
      return RelayedVersion{from->version, from->hash};
    }
    // Behind, and not receiving it yet. Writing (pulling, or waiting on its own ancestor): most
    // likely the version wanted here, soon. Idle, or a writer outwaited before: ask further up.
    if (h.writer == 0 || h.writer == a.stuck_writer) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) {
      a.stuck_writer = h.writer;
      stats_.timeouts++;
      return std::nullopt;
    }
    if (!waited) stats_.waits++;
    waited = true;
    backoff.wait();
  }
}

NodeRelay::Copy NodeRelay::copy(Ancestor& a, const Source& from, std::uint64_t at, std::uint64_t bytes,
                                std::span<std::byte> into, SlotObserver* observer) {
  if (observer) observer->begin(from.version, from.hash, bytes);
  const auto patience = std::chrono::duration<double>(options_.patience_s);
  auto deadline = std::chrono::steady_clock::now() + patience;
  Backoff backoff;
  for (std::uint64_t copied = 0;;) {
    // What of it is in place at the ancestor: all of it once its record names it, else what its
    // progress says, else it is gone (dropped, or the slot reused for a newer version).
    const auto read_header = readHeader(a, answerBy());
    if (!read_header) return Copy::Unanswered;
    const Header& h = *read_header;
    const auto& r = h.slots[from.slot];
    const auto& in = h.arriving[from.slot];
    std::uint64_t ready = 0;
    const bool recorded = r.version == from.version && r.hash == from.hash;
    if (recorded)
      ready = bytes;
    else if (in.version == from.version && in.hash == from.hash)
      ready = std::min(in.ready, bytes);
    else
      return Copy::Gone;
    // Done once the ancestor's record names the version after the last piece: its progress
    // words alone may belong to a pull it then found torn and abandoned.
    if (copied == bytes && recorded) return Copy::Done;
    if (ready < copied) copied = 0;  // the ancestor started it again: so does this copy
    if (ready <= copied) {
      if (std::chrono::steady_clock::now() >= deadline) return Copy::Stalled;
      backoff.wait();
      continue;
    }
    while (copied < ready) {
      const std::uint64_t n = std::min(kFullVersionPiece, ready - copied);
      if (!read(a, at + copied, into.data() + copied, n, answerBy())) return Copy::Unanswered;
      copied += n;
      if (observer) observer->ready(copied);
    }
    deadline = std::chrono::steady_clock::now() + patience;
    backoff.reset();
  }
}

bool NodeRelay::deltas(std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) {
  if (from < 0 || to <= from || to - from > static_cast<std::int64_t>(kDeltaEntries)) return false;
  reapUnanswered();
  for (auto& a : ancestors_) {
    if (a.lost || a.unanswered > 0) continue;
    try {
      if (!deltasFrom(a, from, to, out)) continue;
    } catch (const Error& e) {
      passOver(a, e);
      continue;
    }
    stats_.deltas += static_cast<std::uint64_t>(to - from);
    servedBy(a, static_cast<std::uint64_t>(to - from));
    for (std::size_t i = 0; i < static_cast<std::size_t>(to - from); ++i) stats_.bytes += out[i].size();
    return true;
  }
  return false;
}

bool NodeRelay::deltasFrom(Ancestor& a, std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.patience_s));
  Backoff backoff;
  bool waited = false;
  int overtaken = 0;
  while (true) {
    // The sequence word alone first: one get does not read its bytes in any given order, so the
    // header's own copy of it says nothing about when its table was read.
    std::uint64_t seq = 0;
    if (!read(a, kDeltaSeq, &seq, sizeof seq, answerBy())) return false;
    const auto read_header = readHeader(a, answerBy());
    if (!read_header) return false;
    const Header& h = *read_header;
    if (h.ring_bytes == 0) return false;  // it keeps no deltas (no children, or full mode)
    if (h.writer != a.stuck_writer) a.stuck_writer = 0;
    const bool stable = seq % 2 == 0 && h.ring_seq == seq;
    if (stable) {
      switch (readDeltas(a, h, seq, from, to, out)) {
        case Deltas::Read: return true;
        case Deltas::Unanswered: return false;
        case Deltas::Moved:
          // A delta was written into the ring while these were read (or what was read does not
          // hold together): read again, a few times.
          stats_.torn_retries++;
          if (++overtaken == kMaxOvertaken) return false;
          backoff.wait();
          continue;
        case Deltas::Missing: break;
      }
    }
    // Not all there. Waiting helps only while the ones missing are newer than any it holds, it
    // is writing, and what it writes is not a full version (which brings no deltas).
    // Its newest delta counts those it applied without keeping them (larger than the ring).
    std::int64_t newest = h.newest_delta, first_missing = to;
    for (const auto& e : h.entries) newest = std::max(newest, e.version);
    for (std::int64_t v = to; v > from; --v)
      if (!entryFor(h, v)) first_missing = v;
    if (stable && newest >= first_missing) return false;
    if (h.writer == 0 || h.writer == a.stuck_writer || h.receivingFull()) return false;
    if (Clock::now() >= deadline) {
      a.stuck_writer = h.writer;
      stats_.timeouts++;
      return false;
    }
    if (!waited) stats_.waits++;
    waited = true;
    backoff.wait();
  }
}

std::optional<NodeRelay::DeltaEntry> NodeRelay::entryFor(const Header& h, std::int64_t version) {
  const DeltaEntry& e = h.entries[static_cast<std::uint64_t>(version) % kDeltaEntries];
  if (e.version != version || e.bytes > h.ring_bytes || e.offset > h.ring_bytes - e.bytes) return std::nullopt;
  return e;
}

NodeRelay::Deltas NodeRelay::readDeltas(Ancestor& a, const Header& h, std::uint64_t seq, std::int64_t from,
                                        std::int64_t to, std::vector<std::vector<std::byte>>& out) {
  const auto n = static_cast<std::size_t>(to - from);
  std::vector<DeltaEntry> entries;
  for (std::int64_t v = from + 1; v <= to; ++v) {
    const auto e = entryFor(h, v);
    if (!e) return Deltas::Missing;
    entries.push_back(*e);
  }
  if (out.size() < n) out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].resize(entries[i].bytes);
    // In pieces, each answered within answer_s like a full version's.
    for (std::uint64_t done = 0; done < entries[i].bytes;) {
      const std::uint64_t piece = std::min(kFullVersionPiece, entries[i].bytes - done);
      if (!read(a, h.ring + entries[i].offset + done, out[i].data() + done, piece, answerBy()))
        return Deltas::Unanswered;
      done += piece;
    }
  }
  std::uint64_t after = 0;
  if (!read(a, kDeltaSeq, &after, sizeof after, answerBy())) return Deltas::Unanswered;
  if (after != seq) return Deltas::Moved;
  // Each one whole (its payload checksum) and the next in the chain, before the replica is
  // touched: a read that went wrong is read again rather than costing a full version.
  for (std::size_t i = 0; i < n; ++i) {
    try {
      const DeltaSummary d = inspectDelta(out[i]);
      if (d.base_version != from + static_cast<std::int64_t>(i) || d.target_version != d.base_version + 1)
        return Deltas::Moved;
    } catch (const DeltaError&) {
      return Deltas::Moved;
    }
  }
  return Deltas::Read;
}

}  // namespace astraflow
