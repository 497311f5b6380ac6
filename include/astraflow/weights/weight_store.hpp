#pragma once
// WeightStore — the versioned weight store of one policy, hosted by the dataflow rank
// (docs/architecture.md §8). The trainer stages each new version into the store's staging area and
// moves on; the host publishes it; rollout ranks read the published version number with one
// small MPI_Get and pull only when they choose. A seqlock makes a torn read (the host
// republishing mid-pull) detectable: it is retried, never applied.
//
// In delta mode the host also encodes each new version against the previous one
// (weights/delta_codec.hpp) and keeps the last `delta_log` deltas in a ring. A reader on
// version r pulls the deltas r+1..P and applies them in place when all are in the log and it
// has applied fewer than `full_sync_every` deltas since its last full version; otherwise it
// pulls the full version. A delta that fails any check is counted, logged with its reason and
// answered by a full pull: the replica never holds weights that did not pass a checksum.
//
// Window (on the host only):
//   [0]  seq               u64  even: stable, odd: the host is writing published data or log
//   [8]  published_version i64  −1 until the first publish
//   [16] published_bytes   u64
//   [24] published_xxh3    u64  checksum of the published bytes (weightsHash)
//   [32] staged_state      u64  0: staging free, 1: a staged version waits to be published
//   [40] staged_version    i64
//   [48] staged_bytes      u64
//   [56] staged trainer wait seconds, [64] step seconds (f64, cumulative)
//   [128] delta log table: kMaxDeltaLog × {target version i64 (−1: empty), ring offset, bytes}
//   [kHeaderBytes] published data (capacity), staging data (capacity), delta ring (log bytes)
#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/win.hpp"
#include "astraflow/weights/delta_codec.hpp"

namespace astraflow {

class Comm;
struct WeightsSection;

struct WeightStoreOptions {
  bool delta = false;           // keep a delta log (weights.mode: delta)
  int delta_log = 8;            // deltas kept (≤ kMaxDeltaLog)
  int full_sync_every = 16;     // deltas a reader may apply in a row before it pulls a full version
  bool zstd = false;            // zstd on top of the delta encoding
  unsigned encode_threads = 1;  // threads of the delta encode (on the publishing worker)
  std::uint64_t log_bytes = 0;  // delta ring size; 0: the capacity (room for ~30 deltas at 1 % density)
};

// The store options the config's `weights` section asks for.
WeightStoreOptions weightStoreOptions(const WeightsSection& weights);

struct WeightStoreStats {
  std::uint64_t staged = 0;
  std::uint64_t published = 0;
  // Host, delta mode.
  std::uint64_t deltas_logged = 0;   // versions published with a delta in the log
  std::uint64_t deltas_skipped = 0;  // versions whose delta was not smaller than the full version
  std::uint64_t delta_bytes_logged = 0;
  std::uint64_t changed_elements = 0;  // bf16 words that changed, over the logged deltas
  std::uint64_t elements = 0;          // bf16 words compared, over the logged deltas
  // Readers.
  std::uint64_t pulls = 0;  // pulls that moved the replica forward
  std::uint64_t full_pulls = 0;
  std::uint64_t deltas_applied = 0;
  std::uint64_t bytes_pulled = 0;     // full versions and deltas, as read from the window
  std::uint64_t torn_retries = 0;     // pulls restarted because the host republished mid-read
  std::uint64_t deltas_rejected = 0;  // corrupt / wrong-base deltas (each followed by a full pull)
  std::uint64_t deltas_kept = 0;      // of deltas_applied: from the node's own kept deltas, not read
};

// The trainer's cumulative batch-wait and step seconds when it staged a version: they travel
// with the version so the dataflow rank's balance report has the trainer's own wait fraction.
struct TrainerClock {
  double wait_seconds = 0;
  double step_seconds = 0;
};

// Told how a slot replica changes, so that others can follow it (NodeWeights: the child nodes'
// relays read a full version down the tree while each level still receives it, and take the
// deltas a node applied from that node instead of the store).
class SlotObserver {
 public:
  virtual ~SlotObserver() = default;
  // A full version arriving piece by piece.
  virtual void begin(std::int64_t version, std::uint64_t hash, std::uint64_t bytes) = 0;
  virtual void ready(std::uint64_t bytes) = 0;  // the first `bytes` are in place
  // The end is the owner's to mark, once the slot's own record says whether the version arrived.
  // `delta` (as logged by the store) has just brought the slot to `version`.
  virtual void deltaApplied(std::int64_t version, std::span<const std::byte> delta) = 0;
  // The deltas to from + 1, from + 2, … (at most `to`) that the slot's node kept already (its
  // other slot applied them), copied into out[0], out[1], …, each whole and in sequence: how many
  // in a row. Those are applied without a read of the store or a relay.
  virtual std::size_t keptDeltas(std::int64_t /*from*/, std::int64_t /*to*/,
                                 std::vector<std::vector<std::byte>>& /*out*/) {
    return 0;
  }
};

// A full version arrives in pieces of this size when someone follows its progress.
inline constexpr std::uint64_t kFullVersionPiece = std::uint64_t{4} << 20;

// What a reader holds: its copy of the weights, their version and checksum. The bytes are its
// own (`blob`), or live in memory it does not own (`slot`: a node-shared slot, NodeWeights) of
// which the version uses the first `slot_bytes`; `observer` (slots only, optional) follows the
// slot's changes.
struct WeightReplica {
  std::vector<std::byte> blob;
  std::span<std::byte> slot;
  std::uint64_t slot_bytes = 0;
  SlotObserver* observer = nullptr;
  std::int64_t version = -1;
  std::uint64_t hash = 0;
  int deltas_since_full = 0;

  std::span<std::byte> bytes() { return slot.empty() ? std::span<std::byte>(blob) : slot.first(slot_bytes); }
  std::span<const std::byte> bytes() const {
    return slot.empty() ? std::span<const std::byte>(blob) : std::span<const std::byte>(slot.first(slot_bytes));
  }
  std::uint64_t size() const { return slot.empty() ? blob.size() : slot_bytes; }
  // Room for a full version of `n` bytes: the blob grows; a slot has its capacity (an Error past it).
  std::span<std::byte> reserve(std::uint64_t n);
};

// What a pull moved: for the trace and the caller's bookkeeping.
struct PullResult {
  std::int64_t version = -1;  // the replica's version afterwards (−1: nothing published yet)
  bool moved = false;         // the replica changed
  bool full = false;          // by a full version (else by deltas)
  bool relayed = false;       // the full version or the deltas came from a VersionRelay, not the store
  std::uint64_t bytes = 0;    // read from the store's window
  std::uint64_t deltas = 0;   // deltas applied
};

// A full version a reader took from somewhere other than the store.
struct RelayedVersion {
  std::int64_t version = -1;
  std::uint64_t hash = 0;
};

// Somewhere other than the store a slot replica can take versions from (NodeWeights' relay: an
// ancestor node's copy, docs/weights.md "Relayed between nodes"). The store asks it first
// whenever a full version or deltas are due, so the store serves only what no relay has.
class VersionRelay {
 public:
  virtual ~VersionRelay() = default;
  // Writes a version ≥ `version` of `bytes` bytes into `into`, checked against its checksum,
  // and says which; nullopt when none is at hand (`into` may then hold anything). Reports its
  // pieces to `observer` when given.
  virtual std::optional<RelayedVersion> fill(std::int64_t version, std::uint64_t bytes, std::span<std::byte> into,
                                             SlotObserver* observer) = 0;
  // The store's deltas to versions from + 1 .. to, in order, into `out` (resized to to − from);
  // false when not all of them are at hand. Their own checks (base version and checksum, the
  // result's checksum) decide whether they apply.
  virtual bool deltas(std::int64_t from, std::int64_t to, std::vector<std::vector<std::byte>>& out) = 0;
};

// What a reader needs to reach the published version (WeightStore::updateFor): the deltas in
// order, or one full version. Spans point into the host's window: valid until its next publish.
struct StoreUpdate {
  std::int64_t version = -1;  // the published version (−1: none yet)
  std::uint64_t hash = 0;     // its checksum
  bool full = false;
  std::vector<std::span<const std::byte>> parts;  // empty: the reader is current
};

// Brings `replica` forward by an update received from another site. Throws DeltaError (with the
// replica marked as needing a full version) when any part fails its checks.
void applyStoreUpdate(WeightReplica& replica, bool full, std::int64_t version, std::uint64_t hash,
                      const std::vector<std::span<const std::byte>>& parts);

class WeightStore {
 public:
  static constexpr int kMaxDeltaLog = 64;

  // Collective over comm; same order on all ranks. `host` holds the window (the dataflow
  // rank); `capacity` bounds one version's bytes.
  WeightStore(const Comm& comm, int host, std::uint64_t capacity, std::string policy, WeightStoreOptions options = {});
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Trainer (any non-host rank): stages `version`. Waits with backoff only while the host has
  // not yet taken the previously staged version — never on a reader. Throws Error above capacity.
  void stage(std::int64_t version, std::span<const std::byte> weights, TrainerClock clock = {});
  // Host: publishes a waiting staged version (in delta mode, also logs its delta), encoding it on
  // the caller's thread; returns its number, or −1 when none waited.
  std::int64_t publishStaged();
  // Host, the dataflow loop's form, which never waits for an encode: a staged version is handed
  // to a worker thread that checksums it and encodes its delta while the caller goes on serving
  // (readers keep reading the previous version); a later call, once the worker is done, publishes
  // it. Returns the version this call published, or −1.
  std::int64_t advancePublish();
  // Host: publishes `weights` as `version` directly (a gateway mirroring another site's store;
  // no trainer stages into such a store). Logs the delta like publishStaged.
  void publish(std::int64_t version, std::span<const std::byte> weights);
  // Host: the published version's bytes (valid until the next publish).
  std::span<const std::byte> publishedBytes();
  // Host: what a reader holding (version, hash) needs, by the same rules as pull().
  StoreUpdate updateFor(std::int64_t version, std::uint64_t hash, int deltas_since_full, bool force_full);
  // Any rank: the published version number (one 8-byte MPI_Get on remote ranks); −1 if none.
  std::int64_t publishedVersion();
  // Any non-host rank: brings `replica` to the published version, by deltas when it can. A slot
  // replica takes the deltas or the full version it is due from `relay` when the relay has them.
  PullResult pull(WeightReplica& replica, VersionRelay* relay = nullptr);

  // Host: the logged delta that produces `version` (empty when it is not in the log). For
  // inspection and for tests that corrupt it on purpose.
  std::span<std::byte> loggedDelta(std::int64_t version);
  // Host: the delta encoded at the last publish (its density and size), if any.
  const DeltaSummary& lastDelta() const { return last_delta_; }
  // Host: the trainer's clock staged with the last version published by publishStaged.
  TrainerClock lastTrainerClock() const { return last_clock_; }

  void progress() const;
  bool isHost() const { return is_host_; }
  std::uint64_t capacity() const { return capacity_; }
  const WeightStoreOptions& options() const { return options_; }
  const WeightStoreStats& stats() const { return stats_; }
  // Host memory the window needs for this capacity and options.
  static std::uint64_t windowBytes(std::uint64_t capacity, const WeightStoreOptions& options);

 private:
  struct LogEntry {
    std::int64_t version;
    std::uint64_t offset, bytes;
  };
  std::uint64_t atomicRead(std::uint64_t offset);
  void atomicWrite(std::uint64_t offset, std::uint64_t value);
  void getBytes(std::uint64_t offset, std::byte* out, std::uint64_t n);
  void putBytes(std::uint64_t offset, const std::byte* in, std::uint64_t n);
  enum class DeltaPull { Applied, Torn, Unavailable };
  // Host: a version on its way from staging to published. Its checksum and delta are made by
  // prepare() (on the worker in advancePublish; only delta_ is written there), then commit()
  // writes the published copy under the seqlock on the caller's thread.
  struct Prepared {
    std::uint64_t hash = 0;
    std::optional<DeltaSummary> delta;  // encoded into delta_ (absent: first version, size change, full mode)
  };
  struct Publishing {
    std::int64_t version = -1;
    std::uint64_t bytes = 0;
    TrainerClock clock;
    std::future<Prepared> work;
  };
  bool startPublish(bool on_worker);  // false when nothing is staged
  std::int64_t finishPublish();
  Prepared prepare(std::int64_t version, std::uint64_t bytes, std::int64_t previous, std::uint64_t previous_bytes,
                   std::uint64_t previous_hash);
  void commit(std::int64_t version, std::uint64_t bytes, const Prepared& prepared);
  void logDelta(std::int64_t version);  // host, inside the seqlock
  DeltaPull pullDeltas(WeightReplica& replica, std::uint64_t seq, std::int64_t published,
                       const std::vector<LogEntry>& log, PullResult& result);
  // Applies pending_[0, n) in order; false (the replica then needs a full version) at the first
  // that fails its checks.
  bool applyPending(WeightReplica& replica, std::size_t n, PullResult& result);
  // The deltas the replica's node kept already (SlotObserver::keptDeltas), applied: true when
  // they brought it to `published`.
  bool applyKept(WeightReplica& replica, std::int64_t published, PullResult& result);
  bool pullRelayedDeltas(WeightReplica& replica, VersionRelay& relay, std::int64_t published, PullResult& result);
  bool pullRelayed(WeightReplica& replica, VersionRelay& relay, std::int64_t published, std::uint64_t bytes,
                   PullResult& result);
  bool pullFull(WeightReplica& replica, std::uint64_t bytes, std::uint64_t hash, std::int64_t version,
                std::uint64_t seq, PullResult& result);

  const Comm& comm_;  // the store's link: it must outlive the store (RoleComms holds it for the run)
  int host_;
  bool is_host_;
  std::uint64_t capacity_;
  std::string policy_;
  WeightStoreOptions options_;
  std::uint64_t log_bytes_;
  Win win_;
  WeightStoreStats stats_;
  // Host: the encoded delta of the version being published and the ring's write position.
  std::vector<std::byte> delta_;
  std::uint64_t log_head_ = 0;
  bool delta_ready_ = false;
  DeltaSummary last_delta_;
  TrainerClock last_clock_;
  // Reader: deltas read and not yet applied; the full version being read.
  std::vector<std::vector<std::byte>> pending_;
  std::vector<std::byte> full_buffer_;
  // Host: the version being published. Last, so that it goes first: its worker is joined before
  // the window and delta_ it works on are freed.
  std::optional<Publishing> publishing_;
};

}  // namespace astraflow
