#pragma once
// NodeRelay — weight versions relayed between nodes (docs/weights.md, "Relayed between nodes";
// weights.relay_fanout, off by default). The nodes of a weight link form a tree, `fanout`
// children per node, numbered in the order of their first ranks; node 0 takes versions from the
// store. A node's writer that is due a full version reads it from the nearest ancestor node that
// has it — from any slot of that node's shared copy that holds or is receiving it — through a
// window the node's first rank exposes over the copy. One that is due deltas reads them from the
// nearest ancestor whose delta ring holds them all (a node with children keeps there the deltas
// its writers applied). Whether those
// reads need the relaying rank depends on the transport (over RDMA they do not; elsewhere its
// loop answers them at every step, serve()). The store sends a full version to the root node,
// and each node sends it to at most `fanout` others, instead of the store sending it to every
// node.
//
// A version is copied piece by piece as it arrives at the ancestor (the slot's progress words),
// and announced the same way to this node's own children, so a version goes down every level
// of the tree at once rather than one level after the other.
//
// An ancestor that is behind but writing (its writer lock is held: it is pulling, or waiting
// on its own ancestor) is waited for, up to `patience`; one that is behind and idle, one past
// the patience and one whose window fails are passed over for the next ancestor up, and after
// the last one the store serves. A copy is checked as every pull is: the slot's record read
// again after the bytes (an ancestor that moved on is read again) and the bytes' XXH3 against
// the record's, which the ancestor checked against the store's. Deltas are read between two
// reads of the ring's sequence word, each whole and in sequence by its payload checksum and
// versions (a ring that moved meanwhile is read again), and their own checks decide when they
// are applied, as the store's do.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/win.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "node_layout.hpp"

namespace astraflow {

class SharedWin;

// Collective over `readers` (every rank that shares node copies of a link) and `node` (this
// rank's node group): where this rank's node stands in the relay's tree.
NodeNumbering numberNodes(const Comm& readers, const Comm& node);

class NodeRelay final : public VersionRelay {
 public:
  // Collective over `readers`. `node` is this rank's node group, `nodes` numberNodes' answer and
  // `segment` its node's copy, whose first rank exposes it; `capacity` is one slot's bytes (the
  // same on every node).
  NodeRelay(Comm readers, const Comm& node, NodeNumbering nodes, const SharedWin& segment, std::uint64_t capacity,
            NodeRelayOptions options, std::string policy);
  // On a node's first rank with child nodes: lets MPI serve the children's gets. Transports
  // without one-sided reads of memory MPI did not allocate (UCX between processes that cannot
  // read each other's memory directly, or over TCP) answer a get only inside an MPI call of the
  // target, so the rollout loop calls this at every step.
  void serve() const;

  ~NodeRelay();
  NodeRelay(const NodeRelay&) = delete;
  NodeRelay& operator=(const NodeRelay&) = delete;

  bool hasAncestors() const { return !ancestors_.empty(); }
  int nodeIndex() const { return index_; }
  int nodes() const { return nodes_; }
  std::optional<RelayedVersion> fill(std::int64_t version, std::uint64_t bytes, std::span<std::byte> into,
                                     SlotObserver* observer) override;
  bool deltas(std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) override;
  const NodeRelayStats& stats() const { return stats_; }

 private:
  struct Ancestor {
    int rank;                        // its first rank, in the readers' numbering (the window's)
    bool lost = false;               // its window failed: passed over from then on
    int unanswered = 0;              // reads of it still in flight past answer_s: passed over meanwhile
    std::uint64_t stuck_writer = 0;  // a writer outwaited once: not waited for again
  };
  // A read given up on: its buffer lives until MPI completes it (reapUnanswered).
  struct Unanswered {
    std::size_t ancestor;
    std::vector<std::byte> buffer;
    RmaRequest request;
  };
  using Clock = std::chrono::steady_clock;
  // A slot's full version on its way in (node_layout.hpp's progress words).
  struct Arriving {
    std::int64_t version;
    std::uint64_t hash, bytes, ready;
  };
  struct DeltaEntry {
    std::int64_t version;
    std::uint64_t offset, bytes;
  };
  struct Header {
    std::uint64_t writer, data;
    std::uint64_t ring, ring_bytes, ring_seq;  // the delta ring (ring_bytes 0: none)
    std::int64_t newest_delta;                 // the newest delta applied, kept or not
    NodeSlotRecord slots[node_layout::kMaxSlots];
    Arriving arriving[node_layout::kMaxSlots];
    DeltaEntry entries[node_layout::kDeltaEntries];
    bool receivingFull() const;
  };
  // Where an ancestor holds (or is receiving) a version ≥ the one wanted.
  struct Source {
    std::uint64_t slot;
    std::int64_t version;
    std::uint64_t hash;
  };
  enum class Copy { Done, Gone, Stalled, Unanswered };
  // What one ancestor's ring gave: all the deltas, or why not.
  enum class Deltas { Read, Missing, Moved, Unanswered };
  // Collective over the readers: the window over each node's copy (`segment` on first ranks);
  // false, on every rank, when MPI cannot make it.
  bool expose(const SharedWin* segment);
  std::optional<RelayedVersion> fillFrom(Ancestor& a, std::int64_t version, std::uint64_t bytes,
                                         std::span<std::byte> into, SlotObserver* observer);
  // The deltas from + 1 .. to from one ancestor's ring, waiting (up to the patience) while it is
  // writing and not receiving a full version: it is most likely applying them.
  bool deltasFrom(Ancestor& a, std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out);
  static std::optional<DeltaEntry> entryFor(const Header& h, std::int64_t version);  // checked against the ring
  // The deltas the header's table names, between `seq` (read before the header) and the same
  // word read again; Moved when it changed or what was read does not hold together.
  Deltas readDeltas(Ancestor& a, const Header& h, std::uint64_t seq, std::int64_t from, std::int64_t to,
                    std::vector<std::vector<std::byte>>& out);
  static std::optional<Source> sourceIn(const Header& h, std::int64_t version, std::uint64_t bytes);
  // Copies `from` (at byte `at` of the ancestor's window) into `into` as its pieces arrive;
  // Gone when the ancestor dropped it midway, Stalled when nothing came for `patience_s`.
  Copy copy(Ancestor& a, const Source& from, std::uint64_t at, std::uint64_t bytes, std::span<std::byte> into,
            SlotObserver* observer);
  // Reads `n` bytes at `offset` of the ancestor's window into `out` through a bounce buffer
  // (so that a read given up on never lands in a slot); false when unanswered by `by`.
  bool read(Ancestor& a, std::uint64_t offset, void* out, std::uint64_t n, Clock::time_point by);
  std::optional<Header> readHeader(Ancestor& a, Clock::time_point by);
  Clock::time_point answerBy() const;  // now + answer_s
  void passOver(Ancestor& a, const Error& e);
  // `a` served `copies` (a full version, or deltas): counted where it is not the nearest ancestor.
  void servedBy(const Ancestor& a, std::uint64_t copies);
  void reapUnanswered();

  Comm readers_;
  std::string policy_;
  NodeRelayOptions options_;
  bool serves_ = false;  // this rank exposes its node's copy to child nodes
  std::uint64_t stride_;
  int index_ = 0, nodes_ = 1;
  std::vector<Ancestor> ancestors_;  // nearest first
  Win win_;
  std::vector<std::byte> bounce_;
  std::vector<Unanswered> unanswered_;  // after win_: completed (waited for) before the window goes
  NodeRelayStats stats_;
};

}  // namespace astraflow
