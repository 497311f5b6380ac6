// The versioned weight store: one host rank's RMA window with the published version, the
// staging area a trainer fills, and the delta log readers apply from (docs/weights.md).
#include "astraflow/weights/weight_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include <sched.h>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/weights/delta_codec.hpp"

#include "store_window.hpp"

namespace astraflow {

using namespace store_window;

namespace {

// The cores this process may run on (its affinity mask, which mpirun's binding sets), at most
// `cap`: the encode is bound by memory bandwidth, which a few threads already fill.
unsigned usableCores(unsigned cap) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(static_cast<unsigned>(n), 1u, cap);
}

std::uint64_t logBytesOf(std::uint64_t capacity, const WeightStoreOptions& o) {
  if (!o.delta) return 0;
  return o.log_bytes ? o.log_bytes : capacity;
}

}  // namespace

WeightStoreOptions weightStoreOptions(const WeightsSection& weights) {
  WeightStoreOptions o;
  o.delta = weights.mode == WeightsMode::Delta;
  o.delta_log = weights.delta_log;
  o.full_sync_every = weights.full_sync_every;
  o.zstd = weights.compression == WeightsCompression::Zstd;
  o.encode_threads = weights.encode_threads > 0 ? static_cast<unsigned>(weights.encode_threads) : usableCores(8);
  return o;
}

std::uint64_t WeightStore::windowBytes(std::uint64_t capacity, const WeightStoreOptions& options) {
  return kHeaderBytes + 2 * capacity + logBytesOf(capacity, options);
}

WeightStore::WeightStore(const Comm& comm, int host, std::uint64_t capacity, std::string policy,
                         WeightStoreOptions options)
    : comm_(comm),
      host_(host),
      is_host_(comm.rank() == host),
      capacity_(capacity),
      policy_(std::move(policy)),
      options_(options),
      log_bytes_(logBytesOf(capacity, options)) {
  if (options_.delta_log < 1 || options_.delta_log > kMaxDeltaLog) {
    throw Error(
        fmt::format("weights:{}: delta log of {} versions; allowed 1..{}", policy_, options_.delta_log, kMaxDeltaLog));
  }
  win_ = Win::allocate(comm, is_host_ ? windowBytes(capacity_, options_) : 0, ("weights:" + policy_).c_str());
  win_.lockAll();
  if (is_host_) {
    std::memset(win_.base(), 0, kHeaderBytes);
    win_.localWord(kPubVersion).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    for (int i = 0; i < kMaxDeltaLog; ++i) {
      win_.localWord(kLogTable + kLogEntryBytes * i).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    }
    win_.sync();
  }
  comm.barrier();
}

WeightStore::~WeightStore() = default;

void WeightStore::progress() const { comm_.driveProgress(); }

// Flag and seq words go through MPI atomics on every rank, the host included: osc sm
// serialises atomics with a lock that plain loads/stores bypass (see RmaRing::readSeq).
std::uint64_t WeightStore::atomicRead(std::uint64_t offset) {
  if (is_host_) win_.sync();
  return win_.atomicLoad(host_, offset);
}

void WeightStore::atomicWrite(std::uint64_t offset, std::uint64_t value) {
  if (is_host_) win_.sync();  // local writes before this (published data) are complete first
  win_.atomicStore(host_, offset, value);
}

void WeightStore::getBytes(std::uint64_t offset, std::byte* out, std::uint64_t n) {
  if (is_host_) {
    std::memcpy(out, win_.base() + offset, n);
    return;
  }
  win_.get(host_, offset, out, n);
  win_.flush(host_);
}

void WeightStore::putBytes(std::uint64_t offset, const std::byte* in, std::uint64_t n) {
  win_.put(host_, offset, in, n);
  win_.flush(host_);
}

void WeightStore::stage(std::int64_t version, std::span<const std::byte> weights, TrainerClock clock) {
  if (is_host_) throw Error(fmt::format("weights:{}: the host rank cannot stage versions", policy_));
  if (weights.size() > capacity_) {
    throw Error(fmt::format("weights:{}: version {} has {} bytes, the store holds at most {}", policy_, version,
                            weights.size(), capacity_));
  }
  Backoff backoff;
  while (atomicRead(kStagedState) != 0) backoff.wait();
  putBytes(kHeaderBytes + capacity_, weights.data(), weights.size());
  std::uint64_t meta[4] = {static_cast<std::uint64_t>(version), weights.size(), 0, 0};
  std::memcpy(&meta[2], &clock.wait_seconds, 8);
  std::memcpy(&meta[3], &clock.step_seconds, 8);
  win_.put(host_, kStagedVersion, meta, sizeof meta);
  win_.flush(host_);
  // Only now, with data and metadata complete at the host, does the flag say "full".
  atomicWrite(kStagedState, 1);
  stats_.staged++;
}

std::int64_t WeightStore::publishStaged() {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host publishes", policy_));
  if (!publishing_ && !startPublish(/*on_worker=*/false)) return -1;
  publishing_->work.wait();  // runs a deferred encode here; waits for a worker's
  return finishPublish();
}

std::int64_t WeightStore::advancePublish() {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host publishes", policy_));
  if (!publishing_) {
    startPublish(/*on_worker=*/true);
    return -1;
  }
  if (publishing_->work.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return -1;
  return finishPublish();
}

bool WeightStore::startPublish(bool on_worker) {
  if (atomicRead(kStagedState) != 1) return false;
  win_.sync();
  Publishing p;
  p.version = static_cast<std::int64_t>(win_.localWord(kStagedVersion).load());
  p.bytes = win_.localWord(kStagedBytes).load();
  const std::uint64_t wait_bits = win_.localWord(kStagedWait).load(), step_bits = win_.localWord(kStagedStep).load();
  std::memcpy(&p.clock.wait_seconds, &wait_bits, 8);
  std::memcpy(&p.clock.step_seconds, &step_bits, 8);
  // Only this rank writes the published copy and the trainer waits for the staging flag, so both
  // copies hold still until commit(): the worker reads them while readers keep reading.
  const auto previous = static_cast<std::int64_t>(win_.localWord(kPubVersion).load());
  const std::uint64_t previous_bytes = win_.localWord(kPubBytes).load(),
                      previous_hash = win_.localWord(kPubHash).load();
  p.work = std::async(on_worker ? std::launch::async : std::launch::deferred,
                      [this, v = p.version, n = p.bytes, previous, previous_bytes, previous_hash] {
                        return prepare(v, n, previous, previous_bytes, previous_hash);
                      });
  publishing_ = std::move(p);
  return true;
}

std::int64_t WeightStore::finishPublish() {
  Publishing p = std::move(*publishing_);
  publishing_.reset();
  const Prepared prepared = p.work.get();  // an encode's error surfaces here, on the caller's thread
  last_clock_ = p.clock;
  commit(p.version, p.bytes, prepared);
  atomicWrite(kStagedState, 0);
  return p.version;
}

void WeightStore::publish(std::int64_t version, std::span<const std::byte> weights) {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host publishes", policy_));
  if (weights.size() > capacity_) {
    throw Error(fmt::format("weights:{}: version {} has {} bytes, the store holds at most {}", policy_, version,
                            weights.size(), capacity_));
  }
  if (publishing_) {
    throw Error(fmt::format("weights:{}: version {} published directly while staged version {} is publishing", policy_,
                            version, publishing_->version));
  }
  // No trainer stages into this store (a gateway's mirror): the staging area is free to use.
  std::memcpy(win_.base() + kHeaderBytes + capacity_, weights.data(), weights.size());
  const auto previous = static_cast<std::int64_t>(win_.localWord(kPubVersion).load());
  commit(version, weights.size(),
         prepare(version, weights.size(), previous, win_.localWord(kPubBytes).load(), win_.localWord(kPubHash).load()));
}

WeightStore::Prepared WeightStore::prepare(std::int64_t version, std::uint64_t bytes, std::int64_t previous,
                                           std::uint64_t previous_bytes, std::uint64_t previous_hash) {
  const std::byte* base = win_.base();
  const std::span<const std::byte> staged(base + kHeaderBytes + capacity_, bytes);
  Prepared out;
  out.hash = weightsHash(staged);
  if (options_.delta && previous >= 0 && version == previous + 1 && bytes == previous_bytes) {
    out.delta = encodeDelta(std::span<const std::byte>(base + kHeaderBytes, bytes), staged, previous, version, delta_,
                            {.zstd = options_.zstd, .threads = options_.encode_threads}, previous_hash, out.hash);
  }
  return out;
}

void WeightStore::commit(std::int64_t version, std::uint64_t bytes, const Prepared& prepared) {
  std::byte* base = win_.base();
  delta_ready_ = false;
  if (prepared.delta) {
    last_delta_ = *prepared.delta;
    if (delta_.size() < bytes && delta_.size() <= log_bytes_) {
      delta_ready_ = true;
      stats_.deltas_logged++;
      stats_.delta_bytes_logged += delta_.size();
      stats_.changed_elements += prepared.delta->changed;
      stats_.elements += prepared.delta->words;
    } else {
      stats_.deltas_skipped++;  // readers behind it pull the full version
    }
  }
  // Seqlock write: odd while the published copy and the log change.
  const std::uint64_t seq = atomicRead(kSeq);
  atomicWrite(kSeq, seq + 1);
  std::memcpy(base + kHeaderBytes, base + kHeaderBytes + capacity_, bytes);
  win_.localWord(kPubVersion).store(static_cast<std::uint64_t>(version));
  win_.localWord(kPubBytes).store(bytes);
  win_.localWord(kPubHash).store(prepared.hash);
  if (options_.delta) logDelta(version);
  atomicWrite(kSeq, seq + 2);
  stats_.published++;
}

// Host, inside the seqlock: the new delta goes at the ring's head (wrapping to 0 when it does not
// fit before the end); entries it overwrites leave the table. Without a delta the chain to the
// newest version is broken, so the table empties and readers behind pull a full version.
void WeightStore::logDelta(std::int64_t version) {
  std::byte* base = win_.base();
  auto entry = [&](int i, std::uint64_t field) { return win_.localWord(kLogTable + kLogEntryBytes * i + 8 * field); };
  if (!delta_ready_) {
    for (int i = 0; i < options_.delta_log; ++i) entry(i, 0).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    return;
  }
  const std::uint64_t n = delta_.size();
  if (log_head_ + n > log_bytes_) log_head_ = 0;
  for (int i = 0; i < options_.delta_log; ++i) {
    const auto v = static_cast<std::int64_t>(entry(i, 0).load());
    const std::uint64_t off = entry(i, 1).load(), len = entry(i, 2).load();
    if (v >= 0 && off < log_head_ + n && log_head_ < off + len) {
      entry(i, 0).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    }
  }
  const int slot = static_cast<int>(version % options_.delta_log);
  std::memcpy(base + kHeaderBytes + 2 * capacity_ + log_head_, delta_.data(), n);
  entry(slot, 1).store(log_head_);
  entry(slot, 2).store(n);
  entry(slot, 0).store(static_cast<std::uint64_t>(version));
  log_head_ += n;
}

std::span<std::byte> WeightStore::loggedDelta(std::int64_t version) {
  if (!is_host_ || !options_.delta || version < 0) return {};
  std::byte* base = win_.base();
  const int slot = static_cast<int>(version % options_.delta_log);
  const std::uint64_t at = kLogTable + kLogEntryBytes * slot;
  if (static_cast<std::int64_t>(win_.localWord(at).load()) != version) return {};
  return {base + kHeaderBytes + 2 * capacity_ + win_.localWord(at + 8).load(), win_.localWord(at + 16).load()};
}

StoreUpdate WeightStore::updateFor(std::int64_t version, std::uint64_t hash, int deltas_since_full, bool force_full) {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host serves updates", policy_));
  std::byte* base = win_.base();
  StoreUpdate u;
  u.version = static_cast<std::int64_t>(win_.localWord(kPubVersion).load());
  u.hash = win_.localWord(kPubHash).load();
  if (u.version < 0 || (u.version <= version && hash == u.hash && !force_full)) return u;  // nothing newer
  const std::int64_t behind = u.version - version;
  if (!force_full && options_.delta && version >= 0 && behind > 0 && behind <= options_.delta_log &&
      deltas_since_full + behind <= options_.full_sync_every) {
    for (std::int64_t v = version + 1; v <= u.version; ++v) {
      const std::span<std::byte> d = loggedDelta(v);
      if (d.empty()) {
        u.parts.clear();
        break;
      }
      u.parts.emplace_back(d.data(), d.size());
    }
    if (!u.parts.empty()) return u;
  }
  u.full = true;
  u.parts.emplace_back(base + kHeaderBytes, win_.localWord(kPubBytes).load());
  return u;
}

std::span<const std::byte> WeightStore::publishedBytes() {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host holds the published bytes", policy_));
  return {win_.base() + kHeaderBytes, win_.localWord(kPubBytes).load()};
}

std::int64_t WeightStore::publishedVersion() {
  if (is_host_) {
    win_.sync();
    return static_cast<std::int64_t>(win_.localWord(kPubVersion).load(std::memory_order_acquire));
  }
  std::int64_t v = -1;
  win_.get(host_, kPubVersion, &v, sizeof v);
  win_.flush(host_);
  return v;
}

}  // namespace astraflow
