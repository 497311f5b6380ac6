#include "astraflow/weights/weight_store.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"

namespace astraflow {

namespace {

constexpr std::uint64_t kSeq = 0, kPubVersion = 8, kPubBytes = 16, kPubHash = 24;
constexpr std::uint64_t kStagedState = 32, kStagedVersion = 40, kStagedBytes = 48;
constexpr std::uint64_t kHeaderBytes = 64;
constexpr std::uint64_t kChunk = 1ull << 30;  // MPI counts are ints: move data in ≤ 1 GiB calls

std::atomic_ref<std::uint64_t> word(std::byte* base, std::uint64_t offset) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + offset));
}

}  // namespace

std::uint64_t WeightStore::windowBytes(std::uint64_t capacity) { return kHeaderBytes + 2 * capacity; }

WeightStore::WeightStore(const Comm& comm, int host, std::uint64_t capacity, std::string policy)
    : comm_(comm.raw()), host_(host), is_host_(comm.rank() == host), capacity_(capacity), policy_(std::move(policy)) {
  win_ = Win::allocate(comm, is_host_ ? windowBytes(capacity_) : 0, ("weights:" + policy_).c_str());
  win_.lockAll();
  if (is_host_) {
    std::memset(win_.base(), 0, kHeaderBytes);
    word(win_.base(), kPubVersion).store(static_cast<std::uint64_t>(std::int64_t{-1}));
    win_.sync();
  }
  comm.barrier();
}

WeightStore::~WeightStore() = default;

void WeightStore::progress() const {
  int flag = 0;
  ASTRA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE));
}

// Flag and seq words go through MPI atomics on every rank, the host included: osc sm
// serialises atomics with a lock that plain loads/stores bypass (see RmaRing::readSeq).
std::uint64_t WeightStore::atomicRead(std::uint64_t offset) {
  if (is_host_) win_.sync();
  std::uint64_t v = 0;
  ASTRA_MPI_CHECK(MPI_Fetch_and_op(nullptr, &v, MPI_UINT64_T, host_, static_cast<MPI_Aint>(offset), MPI_NO_OP,
                                   win_.raw()));
  win_.flush(host_);
  return v;
}

void WeightStore::atomicWrite(std::uint64_t offset, std::uint64_t value) {
  if (is_host_) win_.sync();  // local writes before this (published data) are complete first
  ASTRA_MPI_CHECK(MPI_Accumulate(&value, 1, MPI_UINT64_T, host_, static_cast<MPI_Aint>(offset), 1, MPI_UINT64_T,
                                 MPI_REPLACE, win_.raw()));
  win_.flush(host_);
}

void WeightStore::getBytes(std::uint64_t offset, std::byte* out, std::uint64_t n) {
  if (is_host_) {
    std::memcpy(out, win_.base() + offset, n);
    return;
  }
  for (std::uint64_t done = 0; done < n; done += kChunk) {
    const int count = static_cast<int>(std::min(kChunk, n - done));
    ASTRA_MPI_CHECK(MPI_Get(out + done, count, MPI_BYTE, host_, static_cast<MPI_Aint>(offset + done), count, MPI_BYTE,
                            win_.raw()));
  }
  win_.flush(host_);
}

void WeightStore::putBytes(std::uint64_t offset, const std::byte* in, std::uint64_t n) {
  for (std::uint64_t done = 0; done < n; done += kChunk) {
    const int count = static_cast<int>(std::min(kChunk, n - done));
    ASTRA_MPI_CHECK(MPI_Put(in + done, count, MPI_BYTE, host_, static_cast<MPI_Aint>(offset + done), count, MPI_BYTE,
                            win_.raw()));
  }
  win_.flush(host_);
}

void WeightStore::stage(std::int64_t version, std::span<const std::byte> weights) {
  if (is_host_) throw Error(fmt::format("weights:{}: the host rank cannot stage versions", policy_));
  if (weights.size() > capacity_) {
    throw Error(fmt::format("weights:{}: version {} has {} bytes, the store holds at most {}", policy_, version,
                            weights.size(), capacity_));
  }
  Backoff backoff;
  while (atomicRead(kStagedState) != 0) backoff.wait();
  putBytes(kHeaderBytes + capacity_, weights.data(), weights.size());
  const std::uint64_t meta[2] = {static_cast<std::uint64_t>(version), weights.size()};
  ASTRA_MPI_CHECK(MPI_Put(meta, 2, MPI_UINT64_T, host_, static_cast<MPI_Aint>(kStagedVersion), 2, MPI_UINT64_T,
                          win_.raw()));
  win_.flush(host_);
  // Only now, with data and metadata complete at the host, does the flag say "full".
  atomicWrite(kStagedState, 1);
  stats_.staged++;
}

std::int64_t WeightStore::publishStaged() {
  if (!is_host_) throw Error(fmt::format("weights:{}: only the host publishes", policy_));
  if (atomicRead(kStagedState) != 1) return -1;
  std::byte* base = win_.base();
  win_.sync();
  const auto version = static_cast<std::int64_t>(word(base, kStagedVersion).load());
  const std::uint64_t bytes = word(base, kStagedBytes).load();
  const std::uint64_t hash = XXH3_64bits(base + kHeaderBytes + capacity_, bytes);
  // Seqlock write: odd while the published copy changes.
  const std::uint64_t seq = atomicRead(kSeq);
  atomicWrite(kSeq, seq + 1);
  std::memcpy(base + kHeaderBytes, base + kHeaderBytes + capacity_, bytes);
  word(base, kPubVersion).store(static_cast<std::uint64_t>(version));
  word(base, kPubBytes).store(bytes);
  word(base, kPubHash).store(hash);
  atomicWrite(kSeq, seq + 2);
  atomicWrite(kStagedState, 0);
  stats_.published++;
  return version;
}

std::int64_t WeightStore::publishedVersion() {
  if (is_host_) {
    win_.sync();
    return static_cast<std::int64_t>(word(win_.base(), kPubVersion).load(std::memory_order_acquire));
  }
  std::int64_t v = -1;
  ASTRA_MPI_CHECK(MPI_Get(&v, 1, MPI_INT64_T, host_, static_cast<MPI_Aint>(kPubVersion), 1, MPI_INT64_T, win_.raw()));
  win_.flush(host_);
  return v;
}

std::int64_t WeightStore::pull(std::vector<std::byte>& out) {
  Backoff backoff;
  std::vector<std::byte> buffer;
  while (true) {
    const std::uint64_t s1 = atomicRead(kSeq);
    if (s1 % 2 == 1) {  // the host is mid-publish
      stats_.torn_retries++;
      backoff.wait();
      continue;
    }
    std::uint64_t meta[3] = {0, 0, 0};  // version, bytes, hash
    getBytes(kPubVersion, reinterpret_cast<std::byte*>(meta), sizeof meta);
    const auto version = static_cast<std::int64_t>(meta[0]);
    if (version < 0) return -1;
    if (meta[1] > capacity_) {
      stats_.torn_retries++;
      continue;
    }
    buffer.resize(meta[1]);
    getBytes(kHeaderBytes, buffer.data(), meta[1]);
    const std::uint64_t s2 = atomicRead(kSeq);
    if (s1 != s2 || XXH3_64bits(buffer.data(), buffer.size()) != meta[2]) {
      stats_.torn_retries++;  // republished while we read: never apply, read again
      backoff.wait();
      continue;
    }
    out.swap(buffer);
    stats_.pulls++;
    stats_.bytes_pulled += out.size();
    return version;
  }
}

}  // namespace astraflow
