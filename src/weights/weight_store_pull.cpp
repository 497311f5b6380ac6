// A reader's side of the weight store: pulling the published version by deltas or in full,
// from the store's window or from a relay, into an owned or a node-shared replica
// (docs/weights.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/weights/delta_codec.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "store_window.hpp"

namespace astraflow {

using namespace store_window;

namespace {

// One delta onto a replica, which moves to its target version; when it fails, the replica is
// marked as needing a full version (its blob may be half-way) and the error goes on.
void applyToReplica(WeightReplica& replica, std::span<const std::byte> delta) {
  try {
    const DeltaSummary s = applyDelta(replica.bytes(), replica.version, replica.hash, delta);
    replica.version = s.target_version;
    replica.hash = s.target_hash;
    replica.deltas_since_full++;
  } catch (const DeltaError&) {
    replica.version = -1;
    replica.hash = 0;
    throw;
  }
}

}  // namespace

std::span<std::byte> WeightReplica::reserve(std::uint64_t n) {
  if (slot.empty()) {
    blob.resize(n);
    return blob;
  }
  if (n > slot.size())
    throw Error(fmt::format("weights: a version of {} bytes does not fit its slot of {}", n, slot.size()));
  slot_bytes = n;
  return slot.first(n);
}

void applyStoreUpdate(WeightReplica& replica, bool full, std::int64_t version, std::uint64_t hash,
                      const std::vector<std::span<const std::byte>>& parts) {
  if (full) {
    if (parts.size() != 1) throw DeltaError(fmt::format("weights: a full version in {} parts", parts.size()));
    if (weightsHash(parts[0]) != hash) throw DeltaError(fmt::format("weights: full v{} fails its checksum", version));
    std::memcpy(replica.reserve(parts[0].size()).data(), parts[0].data(), parts[0].size());
    replica.version = version;
    replica.hash = hash;
    replica.deltas_since_full = 0;
    return;
  }
  for (const auto& d : parts) applyToReplica(replica, d);
  if (replica.version != version || replica.hash != hash) {
    const std::string why =
        fmt::format("weights: deltas ended at v{}, the update announced v{}", replica.version, version);
    replica.version = -1;
    replica.hash = 0;
    throw DeltaError(why);
  }
}

PullResult WeightStore::pull(WeightReplica& replica, VersionRelay* relay) {
  if (is_host_) throw Error(fmt::format("weights:{}: the host holds the weights; it does not pull", policy_));
  PullResult result;
  Backoff backoff;
  bool relay_asked = false;  // for deltas: once per pull (a torn store read does not ask again)
  // One read of the published metadata and the log table: [8, 64 + 24·log).
  const std::uint64_t table_end = kLogTable + kLogEntryBytes * static_cast<std::uint64_t>(options_.delta_log);
  std::vector<std::uint64_t> header(table_end / 8);
  while (true) {
    const std::uint64_t seq = atomicRead(kSeq);
    if (seq % 2 == 1) {  // the host is mid-publish
      stats_.torn_retries++;
      backoff.wait();
      continue;
    }
    getBytes(kPubVersion, reinterpret_cast<std::byte*>(header.data() + 1), table_end - kPubVersion);
    const auto published = static_cast<std::int64_t>(header[kPubVersion / 8]);
    result.version = std::max(published, replica.version);
    if (published < 0 || published <= replica.version) return result;
    const std::int64_t behind = published - replica.version;
    const bool by_deltas = options_.delta && replica.version >= 0 && behind <= options_.delta_log &&
                           replica.deltas_since_full + behind <= options_.full_sync_every &&
                           replica.size() == header[kPubBytes / 8];
    const bool relays = relay && !replica.slot.empty();
    if (by_deltas && !relay_asked) {
      relay_asked = true;
      // Nearest first: the node's own kept deltas (its other slot's), then an ancestor's.
      if (applyKept(replica, published, result)) return result;
      if (relays && replica.version >= 0 && pullRelayedDeltas(replica, *relay, published, result)) return result;
    }
    if (by_deltas && replica.version >= 0) {  // (a relayed delta that failed its checks leaves it at −1)
      std::vector<LogEntry> log(static_cast<std::size_t>(options_.delta_log));
      for (std::size_t i = 0; i < log.size(); ++i) {
        const std::uint64_t* e = header.data() + (kLogTable + kLogEntryBytes * i) / 8;
        log[i] = {static_cast<std::int64_t>(e[0]), e[1], e[2]};
      }
      switch (pullDeltas(replica, seq, published, log, result)) {
        case DeltaPull::Applied: return result;
        case DeltaPull::Torn: backoff.wait(); continue;
        case DeltaPull::Unavailable: break;  // the full version below
      }
    }
    if (relays && pullRelayed(replica, *relay, published, header[kPubBytes / 8], result)) return result;
    if (pullFull(replica, header[kPubBytes / 8], header[kPubHash / 8], published, seq, result)) return result;
    backoff.wait();
  }
}

WeightStore::DeltaPull WeightStore::pullDeltas(WeightReplica& replica, std::uint64_t seq, std::int64_t published,
                                               const std::vector<LogEntry>& log, PullResult& result) {
  const auto behind = static_cast<std::size_t>(published - replica.version);
  if (pending_.size() < behind) pending_.resize(behind);
  for (std::size_t i = 0; i < behind; ++i) {
    const std::int64_t v = replica.version + 1 + static_cast<std::int64_t>(i);
    const LogEntry& e = log[static_cast<std::size_t>(v % options_.delta_log)];
    if (e.version != v || e.bytes > log_bytes_ || e.offset > log_bytes_ - e.bytes) return DeltaPull::Unavailable;
    pending_[i].resize(e.bytes);
    getBytes(kHeaderBytes + 2 * capacity_ + e.offset, pending_[i].data(), e.bytes);
    result.bytes += e.bytes;
    stats_.bytes_pulled += e.bytes;
  }
  if (atomicRead(kSeq) != seq) {
    stats_.torn_retries++;  // the ring moved while we read: read again
    return DeltaPull::Torn;
  }
  if (!applyPending(replica, behind, result)) return DeltaPull::Unavailable;
  stats_.pulls++;
  return DeltaPull::Applied;
}

bool WeightStore::applyPending(WeightReplica& replica, std::size_t n, PullResult& result) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t target = replica.version + 1;
    try {
      applyToReplica(replica, pending_[i]);
    } catch (const DeltaError& e) {
      stats_.deltas_rejected++;
      spdlog::warn("weights:{}: delta to v{} rejected ({}); pulling the full version", policy_, target, e.what());
      return false;
    }
    result.deltas++;
    stats_.deltas_applied++;
    if (replica.observer) replica.observer->deltaApplied(replica.version, pending_[i]);
  }
  result.moved = true;
  result.version = replica.version;
  return true;
}

bool WeightStore::applyKept(WeightReplica& replica, std::int64_t published, PullResult& result) {
  if (!replica.observer || replica.version < 0) return false;
  const std::size_t n = replica.observer->keptDeltas(replica.version, published, pending_);
  if (n == 0) return false;
  const std::uint64_t applied_before = stats_.deltas_applied;
  const bool applied = applyPending(replica, n, result);
  stats_.deltas_kept += stats_.deltas_applied - applied_before;
  if (!applied || replica.version != published) return false;
  stats_.pulls++;
  return true;
}

bool WeightStore::pullRelayedDeltas(WeightReplica& replica, VersionRelay& relay, std::int64_t published,
                                    PullResult& result) {
  if (!relay.deltas(replica.version, published, pending_)) return false;
  if (!applyPending(replica, static_cast<std::size_t>(published - replica.version), result)) return false;
  result.relayed = true;
  stats_.pulls++;
  return true;
}

bool WeightStore::pullRelayed(WeightReplica& replica, VersionRelay& relay, std::int64_t published, std::uint64_t bytes,
                              PullResult& result) {
  if (bytes > capacity_ || bytes > replica.slot.size()) return false;
  replica.version = -1;  // written in place: empty until the relay's copy passes its checksum
  replica.hash = 0;
  const auto got = relay.fill(published, bytes, replica.reserve(bytes), replica.observer);
  if (!got) return false;
  replica.version = got->version;
  replica.hash = got->hash;
  replica.deltas_since_full = 0;
  result.moved = true;
  result.full = true;
  result.relayed = true;
  result.version = got->version;
  stats_.pulls++;
  return true;
}

bool WeightStore::pullFull(WeightReplica& replica, std::uint64_t bytes, std::uint64_t hash, std::int64_t version,
                           std::uint64_t seq, PullResult& result) {
  if (bytes > capacity_) {
    stats_.torn_retries++;
    return false;
  }
  // An owned replica reads into a buffer first, so a torn read leaves it as it was; a slot (a
  // node's spare copy, which nobody uses while it is written) is read into directly and marked
  // empty until a read passes its checksum.
  std::span<std::byte> into;
  if (replica.slot.empty()) {
    full_buffer_.resize(bytes);
    into = full_buffer_;
  } else {
    replica.version = -1;
    replica.hash = 0;
    into = replica.reserve(bytes);
  }
  if (replica.observer) {
    // Piece by piece, each announced as it lands (the child nodes follow it).
    replica.observer->begin(version, hash, bytes);
    for (std::uint64_t done = 0; done < bytes;) {
      const std::uint64_t n = std::min(kFullVersionPiece, bytes - done);
      getBytes(kHeaderBytes + done, into.data() + done, n);
      done += n;
      replica.observer->ready(done);
    }
  } else {
    getBytes(kHeaderBytes, into.data(), bytes);
  }
  result.bytes += bytes;
  stats_.bytes_pulled += bytes;
  if (atomicRead(kSeq) != seq || weightsHash(into) != hash) {
    stats_.torn_retries++;  // republished while we read: never apply, read again
    return false;
  }
  if (replica.slot.empty()) {
    replica.blob.swap(full_buffer_);
    full_buffer_ = {};  // the previous version's bytes: not kept beside the new one
  }
  replica.version = version;
  replica.hash = hash;
  replica.deltas_since_full = 0;
  result.moved = true;
  result.full = true;
  result.version = version;
  stats_.pulls++;
  stats_.full_pulls++;
  return true;
}

}  // namespace astraflow
