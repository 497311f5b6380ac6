#pragma once
// NodeWeights — one policy's current weight version held once per node, in memory the node's
// rollout ranks share (docs/weights.md, "One copy per node"). Whichever member first sees the
// store ahead takes the node's writer lock, pulls the new version (by deltas or in full) into
// the node's spare slot and makes it current; the others move to it at their next refresh and
// use its bytes in place (an engine running bf16 on the CPU computes straight from them).
//
// Two slots (one for a node of one rank): the current version and a spare. A member binds the
// slot it uses; the writer only writes a slot that is neither current nor bound by another
// member, so nobody ever reads bytes while they are written. A member that still uses the
// spare (it has not refreshed since the last version) makes the writer wait: counted, and the
// node stays on the version it has until that member moves. Locks and bindings name their
// holder's pid, so a member that died holds nothing.
//
// A full version or the deltas due come from the nearest ancestor node that has them when the
// link has several nodes (NodeRelay, src/weights/node_relay.hpp), from the store otherwise.
//
// Shared window (on the node's first member; the layout's constants: src/weights/node_layout.hpp):
//   [0]  current slot        u64  kNone until the first version
//   [8]  writer              u64  0: free, else the pid of the member writing
//   [16] current version     i64  a hint for "is the node behind?" (the slot's own record decides)
//   [24] data offset         u64  where slot 0 starts (for the child nodes' relay reads)
//   [32] delta ring offset, [40] its bytes (0: none), [48] its write position, [56] its seq
//                                 (odd while a delta is written)
//   [64 + 32 s]   slot s: version i64 (−1: empty or being written), xxh3, bytes, deltas since full
//   [128 + 32 s]  slot s's full version on its way in: version i64 (−1: none), xxh3, bytes,
//                 bytes in place (child nodes copy what is in place while the rest arrives)
//   [192 + 24 i]  delta ring entry i (of 8): version i64 (−1: none), offset in the ring, bytes
//   [512 + 16 m]  member m: bound slot (kNone: none), pid
//   [data]        slot s at data + s · stride (page-aligned), `capacity` bytes each; then the
//                 delta ring, on nodes with child nodes in delta mode
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/shared_win.hpp"
#include "astraflow/weights/weight_store.hpp"

namespace astraflow {

struct WeightsSection;

struct NodeWeightsStats {
  std::uint64_t versions_written = 0;  // versions this member pulled for its node
  std::uint64_t versions_bound = 0;    // times it moved to a newer version of its node
  std::uint64_t writer_busy = 0;       // refreshes that found another member writing
  std::uint64_t spare_in_use = 0;      // writes put off: another member still used the spare slot
};

// Full versions relayed between nodes (NodeRelay).
struct NodeRelayOptions {
  int fanout = 0;          // child nodes each node relays to (weights.relay_fanout); 0: all from the store
  double patience_s = 30;  // how long a node waits on a writing ancestor before it asks further up
  double answer_s = 2;     // how long one read of an ancestor may go unanswered (its rank inside a long call)
  // Bytes of the ring in which a node with child nodes keeps the deltas its writers applied, for
  // the children to take instead of the store's (delta mode); 0: deltas come from the store.
  std::uint64_t delta_ring = 0;
};

// The delta ring of a node with child nodes, for versions of `capacity` bytes: a quarter of a
// version, room for the last several deltas at the densities RL updates give (a delta larger
// than the ring is not kept; the children take it from the store).
constexpr std::uint64_t relayDeltaRingBytes(std::uint64_t capacity) { return capacity / 4; }

// The relay the config's `weights` section asks for (the delta ring in delta mode only).
NodeRelayOptions nodeRelayOptions(const WeightsSection& weights, std::uint64_t capacity);

struct NodeRelayStats {
  std::uint64_t relayed = 0;         // full versions this member took from an ancestor node
  std::uint64_t deltas = 0;          // deltas it took from an ancestor node
  std::uint64_t bytes = 0;           // the bytes of both
  std::uint64_t waits = 0;           // relays that waited for an ancestor still writing
  std::uint64_t timeouts = 0;        // ancestors outwaited (patience_s): the next one up asked
  std::uint64_t torn_retries = 0;    // copies read again because the ancestor moved on mid-read
  std::uint64_t rejected = 0;        // copies that failed their checksum
  std::uint64_t ancestors_lost = 0;  // ancestors whose window failed (passed over from then on)
  std::uint64_t unanswered = 0;      // reads an ancestor left unanswered past answer_s (passed over meanwhile)
  // Of the versions and deltas taken, those an ancestor past the nearest one served (the nearer
  // ones were behind, lost, or outwaited).
  std::uint64_t further_up = 0;
  int last_source = -1;  // the first rank (in the link's rollout ranks) of the ancestor that served the last one
};

class NodeRelay;

// Where a rollout rank's node stands among the link's nodes (NodeRelay's tree): its index, in
// the order of the nodes' first ranks, the node count, and each node's first rank among the
// link's rollout ranks.
struct NodeNumbering {
  int index = 0, nodes = 1;
  std::vector<int> first_rank;
  bool hasChildren(int fanout) const { return fanout > 0 && index * fanout + 1 < nodes; }
};

// One slot of a node's copy: its version (−1: empty or being written), checksum, bytes and the
// deltas applied to it since its last full version.
struct NodeSlotRecord {
  std::int64_t version;
  std::uint64_t hash, bytes, deltas_since_full;
};

// The version a member is bound to: its bytes in the shared memory (valid while bound).
struct NodeVersion {
  std::int64_t version = -1;
  std::uint64_t hash = 0;
  std::span<const std::byte> bytes;
};

class NodeWeights {
 public:
  // Collective over `link` (the store's comm, WeightStore's); same order on all its ranks. The
  // `reader` ranks (rollout ranks) are grouped by node (splitIntoNodes); the others only take
  // part in the split. `capacity` bounds one version's bytes (the store's).
  NodeWeights(const Comm& link, bool reader, std::uint64_t capacity, std::string policy, NodeRelayOptions relay = {});
  ~NodeWeights();
  NodeWeights(const NodeWeights&) = delete;
  NodeWeights& operator=(const NodeWeights&) = delete;

  bool member() const { return win_.valid(); }
  int nodeRank() const { return node_.rank(); }
  int nodeSize() const { return node_.size(); }

  // At a point where this member computes nothing with its bound bytes: when `target` ≥ 0 and
  // the node holds an older version, this member brings the node's spare slot to the store's
  // published version and makes it current — or, when another member is writing, waits for it
  // (with backoff). Then it binds the node's current version and returns it: older than
  // `target` only when the write was put off (another member still uses the spare).
  NodeVersion refresh(WeightStore& store, std::int64_t target);
  // Unbinds (a member that copied the bytes into its own model keeps nothing shared in use).
  void release();
  // The node's newest version (a hint: it may move at once).
  std::int64_t nodeVersion() const;

  const NodeWeightsStats& stats() const { return stats_; }
  // Between steps of this rank's loop: lets MPI answer the child nodes' reads of this node's
  // copy where the transport needs the target to take part (node_relay.hpp). Cheap (an
  // MPI_Iprobe) on the one rank per node that serves children, nothing elsewhere.
  void serve() const;
  // This member's relay figures (zeros on the tree's root node and in a link of one node).
  NodeRelayStats relayStats() const;
  // This member's node in the relay tree: its index (0 pulls from the store) and the nodes.
  int nodeIndex() const;
  int nodes() const;
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};

 private:
  using SlotRecord = NodeSlotRecord;
  // The node group, the shared memory and its header; the relay's view of the nodes.
  NodeNumbering setUp(const Comm& readers, const NodeRelayOptions& relay);
  SlotRecord slotRecord(std::uint64_t slot) const;
  void setSlotRecord(std::uint64_t slot, const SlotRecord& r);
  std::span<std::byte> slotMemory(std::uint64_t slot) const;
  bool tryLock();
  void unlock();
  // The spare slot the writer may fill, or kNone when another member still uses it.
  std::uint64_t writableSlot();
  void write(WeightStore& store, std::uint64_t slot);
  NodeVersion bind();

  Comm node_;
  SharedWin win_;
  std::string policy_;
  std::uint64_t capacity_ = 0, slots_ = 0, stride_ = 0, data_ = 0;
  std::uint64_t pid_ = 0;
  std::uint64_t bound_ = kNone;
  std::int64_t bound_version_ = -1;  // the newest version this member has bound
  NodeWeightsStats stats_;
  // After win_: its window over the node's copy is freed before the copy is unmapped.
  std::unique_ptr<NodeRelay> relay_;
};

}  // namespace astraflow
