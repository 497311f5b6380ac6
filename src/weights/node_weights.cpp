// One policy's version per node in shared memory: the writer lock, the two slots and the
// members' bindings (the protocol is in node_weights.hpp).
#include "astraflow/weights/node_weights.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/win.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/weights/delta_codec.hpp"
#include "node_layout.hpp"
#include "node_relay.hpp"

namespace astraflow {

namespace {

using namespace node_layout;

// A member's process exists and has not ended: a killed rank can stay a zombie until its
// launcher reaps it, and it holds nothing either.
bool alive(std::uint64_t pid) {
  if (pid == 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(stat, text);
  const auto close = text.rfind(')');  // "pid (command) state ...": the command may hold spaces
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

// What the writer does to a slot, told to the child nodes' relays: a full version as it arrives,
// in the slot's progress words (marked over when it goes, which is after the slot's record is
// set: a follower always finds the version in one or the other), and each delta it applies, in
// the node's delta ring when the node keeps one.
class SlotAnnouncer final : public SlotObserver {
 public:
  SlotAnnouncer(const SharedWin& win, std::uint64_t slot) : win_(win), at_(kProgress + kProgressBytes * slot) {}
  ~SlotAnnouncer() override { win_.word(at_).store(kNone); }
  SlotAnnouncer(const SlotAnnouncer&) = delete;
  SlotAnnouncer& operator=(const SlotAnnouncer&) = delete;
  void begin(std::int64_t version, std::uint64_t hash, std::uint64_t bytes) override {
    win_.word(at_).store(kNone);
    win_.word(at_ + 8).store(hash);
    win_.word(at_ + 16).store(bytes);
    win_.word(at_ + 24).store(0);
    win_.word(at_).store(static_cast<std::uint64_t>(version));
  }
  void ready(std::uint64_t bytes) override { win_.word(at_ + 24).store(bytes); }
  void deltaApplied(std::int64_t version, std::span<const std::byte> delta) override;
  std::size_t keptDeltas(std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) override;

 private:
  const SharedWin& win_;
  std::uint64_t at_;
};

std::uint64_t entryAt(std::uint64_t i) { return kDeltaTable + kDeltaEntryBytes * i; }

void SlotAnnouncer::deltaApplied(std::int64_t version, std::span<const std::byte> delta) {
  const std::uint64_t ring = win_.word(kDeltaRing).load(), ring_bytes = win_.word(kDeltaRingBytes).load();
  const std::uint64_t n = delta.size();
  if (ring_bytes == 0) return;
  if (static_cast<std::int64_t>(win_.word(kDeltaNewest).load()) < version)
    win_.word(kDeltaNewest).store(static_cast<std::uint64_t>(version));
  if (n > ring_bytes) return;  // too large to keep: children ask further up
  // A node of two slots applies each delta twice (once per slot): kept once. Its table entry
  // holds it already, or a newer delta that it must not replace.
  const std::uint64_t e = entryAt(static_cast<std::uint64_t>(version) % kDeltaEntries);
  if (static_cast<std::int64_t>(win_.word(e).load()) >= version) return;
  // Odd while written (a writer that died midway left it odd: made odd again all the same).
  const std::uint64_t seq = win_.word(kDeltaSeq).load() | 1;
  win_.word(kDeltaSeq).store(seq);
  std::atomic_thread_fence(std::memory_order_release);  // the odd word before any byte below
  std::uint64_t at = win_.word(kDeltaHead).load();
  if (at > ring_bytes - n) at = 0;
  for (std::uint64_t i = 0; i < kDeltaEntries; ++i) {  // the entries whose bytes it overwrites go
    const std::uint64_t other = entryAt(i);
    const std::uint64_t offset = win_.word(other + 8).load(), bytes = win_.word(other + 16).load();
    if (offset < at + n && at < offset + bytes) win_.word(other).store(kNone);
  }
  win_.word(e).store(kNone);
  std::memcpy(win_.base() + ring + at, delta.data(), n);
  win_.word(e + 8).store(at);
  win_.word(e + 16).store(n);
  win_.word(e).store(static_cast<std::uint64_t>(version));
  win_.word(kDeltaHead).store(at + n);
  win_.word(kDeltaSeq).store(seq + 1);
}

// Read by the node's writer, which alone writes the ring (it holds the writer lock), so no
// sequence word is needed; a delta a dead writer left half-written has no table entry, and each
// one is checked whole and in sequence all the same.
std::size_t SlotAnnouncer::keptDeltas(std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) {
  const std::uint64_t ring = win_.word(kDeltaRing).load(), ring_bytes = win_.word(kDeltaRingBytes).load();
  if (ring_bytes == 0 || to <= from) return 0;
  const auto wanted = static_cast<std::size_t>(std::min<std::int64_t>(to - from, kDeltaEntries));
  if (out.size() < wanted) out.resize(wanted);
  std::size_t n = 0;
  for (; n < wanted; ++n) {
    const std::int64_t v = from + 1 + static_cast<std::int64_t>(n);
    const std::uint64_t e = entryAt(static_cast<std::uint64_t>(v) % kDeltaEntries);
    const std::uint64_t offset = win_.word(e + 8).load(), bytes = win_.word(e + 16).load();
    if (static_cast<std::int64_t>(win_.word(e).load()) != v || bytes > ring_bytes || offset > ring_bytes - bytes) break;
    out[n].assign(win_.base() + ring + offset, win_.base() + ring + offset + bytes);
    try {
      const DeltaSummary d = inspectDelta(out[n]);
      if (d.base_version != v - 1 || d.target_version != v) break;
    } catch (const DeltaError&) {
      break;
    }
  }
  return n;
}

}  // namespace

NodeRelayOptions nodeRelayOptions(const WeightsSection& weights, std::uint64_t capacity) {
  NodeRelayOptions o;
  o.fanout = weights.relay_fanout;
  o.delta_ring = weights.relay_fanout > 0 && weights.mode == WeightsMode::Delta ? relayDeltaRingBytes(capacity) : 0;
  return o;
}

NodeWeights::NodeWeights(const Comm& link, bool reader, std::uint64_t capacity, std::string policy,
                         NodeRelayOptions relay)
    : policy_(std::move(policy)), capacity_(capacity), pid_(static_cast<std::uint64_t>(::getpid())) {
  Comm readers = link.split(reader ? 0 : -1, link.rank());
  // A node that cannot hold its copy stops every rank of the link (the host and trainers too),
  // with the reason, rather than leaving them waiting on ranks that gave up.
  std::string error;
  NodeNumbering nodes;
  if (readers.valid()) {
    try {
      nodes = setUp(readers, relay);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (link.allreduceMax(std::uint64_t{error.empty() ? 0u : 1u})) {
    win_ = SharedWin();
    throw WindowAllocationError(
        error.empty() ? fmt::format("node weights:{}: a rollout rank could not set up its node's copy", policy_)
                      : error);
  }
  // Every node has its copy now: the relay between them (collective over the readers).
  if (readers.valid())
    relay_ = std::make_unique<NodeRelay>(std::move(readers), node_, std::move(nodes), win_, capacity_, relay, policy_);
}

NodeNumbering NodeWeights::setUp(const Comm& readers, const NodeRelayOptions& relay) {
  node_ = splitIntoNodes(readers);
  NodeNumbering nodes = numberNodes(readers, node_);
  const auto members = static_cast<std::uint64_t>(node_.size());
  slots_ = members == 1 ? 1 : 2;  // a lone member refreshes only while it computes nothing: one slot
  stride_ = pageAligned(capacity_);
  data_ = pageAligned(kMembers + kMemberBytes * members);
  // The delta ring, after the slots, only on a node whose children would read it.
  const std::uint64_t ring_bytes = nodes.hasChildren(relay.fanout) ? relay.delta_ring : 0;
  const std::string what = "node weights:" + policy_;
  win_ = SharedWin::allocate(node_, data_ + slots_ * stride_ + ring_bytes, what.c_str());
  if (node_.rank() == 0) {
    win_.word(kCurrent).store(kNone);
    win_.word(kWriter).store(0);
    win_.word(kCurrentVersion).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    win_.word(kDataOffset).store(data_);
    win_.word(kDeltaRing).store(data_ + slots_ * stride_);
    win_.word(kDeltaRingBytes).store(ring_bytes);
    win_.word(kDeltaHead).store(0);
    win_.word(kDeltaSeq).store(0);
    win_.word(kDeltaNewest).store(kNone);
    for (std::uint64_t i = 0; i < kDeltaEntries; ++i) win_.word(entryAt(i)).store(kNone);
    for (std::uint64_t s = 0; s < kMaxSlots; ++s) {  // a node of one slot marks the other empty too
      setSlotRecord(s, {-1, 0, 0, 0});
      win_.word(kProgress + kProgressBytes * s).store(kNone);
    }
  }
  node_.barrier();  // the header is set before anyone reads it
  win_.word(kMembers + kMemberBytes * static_cast<std::uint64_t>(node_.rank())).store(kNone);
  win_.word(kMembers + kMemberBytes * static_cast<std::uint64_t>(node_.rank()) + 8).store(pid_);
  node_.barrier();  // every member's entry is set before anyone writes
  return nodes;
}

NodeWeights::~NodeWeights() {
  if (member()) release();
}

NodeRelayStats NodeWeights::relayStats() const { return relay_ ? relay_->stats() : NodeRelayStats{}; }
void NodeWeights::serve() const {
  if (relay_) relay_->serve();
}
int NodeWeights::nodeIndex() const { return relay_ ? relay_->nodeIndex() : 0; }
int NodeWeights::nodes() const { return relay_ ? relay_->nodes() : 0; }

NodeWeights::SlotRecord NodeWeights::slotRecord(std::uint64_t slot) const {
  const std::uint64_t at = kSlots + kSlotRecordBytes * slot;
  return {static_cast<std::int64_t>(win_.word(at).load()), win_.word(at + 8).load(), win_.word(at + 16).load(),
          win_.word(at + 24).load()};
}

void NodeWeights::setSlotRecord(std::uint64_t slot, const SlotRecord& r) {
  const std::uint64_t at = kSlots + kSlotRecordBytes * slot;
  win_.word(at + 8).store(r.hash);
  win_.word(at + 16).store(r.bytes);
  win_.word(at + 24).store(r.deltas_since_full);
  win_.word(at).store(static_cast<std::uint64_t>(r.version));
}

std::span<std::byte> NodeWeights::slotMemory(std::uint64_t slot) const {
  return {win_.base() + data_ + slot * stride_, capacity_};
}

bool NodeWeights::tryLock() {
  std::uint64_t holder = 0;
  if (win_.word(kWriter).compare_exchange_strong(holder, pid_)) return true;
  // A writer that died holds nothing: its slot is marked empty until written again.
  return !alive(holder) && win_.word(kWriter).compare_exchange_strong(holder, pid_);
}

void NodeWeights::unlock() { win_.word(kWriter).store(0); }

std::uint64_t NodeWeights::writableSlot() {
  const std::uint64_t current = win_.word(kCurrent).load();
  const std::uint64_t slot = slots_ == 1 || current == kNone ? 0 : 1 - current;
  for (int m = 0; m < node_.size(); ++m) {
    if (m == node_.rank()) continue;
    const std::uint64_t at = kMembers + kMemberBytes * static_cast<std::uint64_t>(m);
    if (win_.word(at).load() != slot) continue;
    if (alive(win_.word(at + 8).load())) return kNone;
    win_.word(at).store(kNone);  // a member that died binds nothing
  }
  return slot;
}

void NodeWeights::write(WeightStore& store, std::uint64_t slot) {
  const SlotRecord before = slotRecord(slot);
  SlotAnnouncer announcer(win_, slot);  // goes after the record below is set
  WeightReplica replica;
  replica.observer = &announcer;
  replica.slot = slotMemory(slot);
  replica.slot_bytes = before.version >= 0 ? before.bytes : 0;
  replica.version = before.version;
  replica.hash = before.hash;
  replica.deltas_since_full = static_cast<int>(before.deltas_since_full);
  setSlotRecord(slot, {-1, 0, 0, 0});  // being written: an exception leaves it empty
  store.pull(replica, relay_ && relay_->hasAncestors() ? relay_.get() : nullptr);
  if (replica.version < 0) return;  // nothing published yet
  setSlotRecord(slot,
                {replica.version, replica.hash, replica.size(), static_cast<std::uint64_t>(replica.deltas_since_full)});
  const std::uint64_t current = win_.word(kCurrent).load();
  if (current != kNone && current != slot && slotRecord(current).version >= replica.version) return;
  win_.word(kCurrent).store(slot);
  win_.word(kCurrentVersion).store(static_cast<std::uint64_t>(replica.version));
  stats_.versions_written++;
}

NodeVersion NodeWeights::refresh(WeightStore& store, std::int64_t target) {
  release();  // this member computes nothing now: its own binding never holds the writer back
  Backoff backoff;
  bool waited = false;
  while (target >= 0 && nodeVersion() < target) {
    if (tryLock()) {
      struct Unlock {
        NodeWeights& w;
        ~Unlock() { w.unlock(); }
      } guard{*this};
      const std::uint64_t current = win_.word(kCurrent).load();
      if (current == kNone || slotRecord(current).version < target) {
        const std::uint64_t slot = writableSlot();
        if (slot == kNone)
          stats_.spare_in_use++;
        else
          write(store, slot);
      }
      break;
    }
    // Another rank of the node is writing — most likely the version wanted here: wait for it
    // (one pull's time) rather than pull the same version again or go on without it. A first
    // rank keeps answering its child nodes meanwhile: they are likely reading that version.
    if (!waited) stats_.writer_busy++;
    waited = true;
    serve();
    backoff.wait();
  }
  return bind();
}

NodeVersion NodeWeights::bind() {
  const std::uint64_t mine = kMembers + kMemberBytes * static_cast<std::uint64_t>(node_.rank());
  std::uint64_t current = win_.word(kCurrent).load();
  while (current != kNone) {
    // Bound, then checked still current: a writer that looks after this store sees the binding,
    // and one that flipped before it makes this load see the flip (all sequentially consistent).
    win_.word(mine).store(current);
    const std::uint64_t again = win_.word(kCurrent).load();
    if (again == current) break;
    current = again;
  }
  if (current == kNone) {
    release();
    return {};
  }
  const SlotRecord r = slotRecord(current);
  if (r.version > bound_version_) stats_.versions_bound++;
  bound_ = current;
  bound_version_ = r.version;
  return {r.version, r.hash, slotMemory(current).first(r.bytes)};
}

void NodeWeights::release() {
  win_.word(kMembers + kMemberBytes * static_cast<std::uint64_t>(node_.rank())).store(kNone);
  bound_ = kNone;
}

std::int64_t NodeWeights::nodeVersion() const {
  if (win_.word(kCurrent).load() == kNone) return -1;
  return static_cast<std::int64_t>(win_.word(kCurrentVersion).load());
}

}  // namespace astraflow
