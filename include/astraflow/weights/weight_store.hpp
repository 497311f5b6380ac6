#pragma once
// WeightStore — the versioned weight store of one policy, hosted by the dataflow rank
// (ARCHITECTURE §8). The trainer stages each new version into the store's staging area and
// moves on; the host publishes it; rollout ranks read the published version number with one
// small MPI_Get and pull the weights only when they choose. A seqlock makes a torn read
// (the host republishing mid-pull) detectable: it is retried, never applied.
//
// Window (on the host only):
//   [0]  seq              u64   even: stable, odd: the host is writing the published copy
//   [8]  published_version i64  −1 until the first publish
//   [16] published_bytes  u64
//   [24] published_xxh64  u64   checksum of the published bytes
//   [32] staged_state     u64   0: staging free, 1: a staged version waits to be published
//   [40] staged_version   i64
//   [48] staged_bytes     u64
//   [64] published data (capacity bytes), then staging data (capacity bytes)
// The payload is opaque bytes (full bf16 tensors today; sparse deltas later travel the same
// way with their own header).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/win.hpp"

namespace astraflow {

class Comm;

struct WeightStoreStats {
  std::uint64_t staged = 0;
  std::uint64_t published = 0;
  std::uint64_t pulls = 0;
  std::uint64_t bytes_pulled = 0;
  std::uint64_t torn_retries = 0;  // pulls restarted because the host republished mid-read
};

class WeightStore {
 public:
  // Collective over comm; same order on all ranks. `host` holds the window (the dataflow
  // rank); `capacity` bounds one version's bytes.
  WeightStore(const Comm& comm, int host, std::uint64_t capacity, std::string policy);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Trainer (any non-host rank): stages `version`. Waits with backoff only while the host has
  // not yet taken the previously staged version. Throws Error above capacity.
  void stage(std::int64_t version, std::span<const std::byte> weights);
  // Host: publishes a waiting staged version; returns its number, or −1 when none waited.
  std::int64_t publishStaged();
  // Any rank: the published version number (one 8-byte MPI_Get on remote ranks); −1 if none.
  std::int64_t publishedVersion();
  // Any rank: copies the published weights into `out` and returns their version (−1 and
  // `out` untouched when nothing is published). Torn reads and checksum mismatches are retried.
  std::int64_t pull(std::vector<std::byte>& out);

  void progress() const;
  bool isHost() const { return is_host_; }
  std::uint64_t capacity() const { return capacity_; }
  const WeightStoreStats& stats() const { return stats_; }
  static std::uint64_t windowBytes(std::uint64_t capacity);

 private:
  std::uint64_t atomicRead(std::uint64_t offset);
  void atomicWrite(std::uint64_t offset, std::uint64_t value);
  void getBytes(std::uint64_t offset, std::byte* out, std::uint64_t n);
  void putBytes(std::uint64_t offset, const std::byte* in, std::uint64_t n);

  MPI_Comm comm_;
  int host_;
  bool is_host_;
  std::uint64_t capacity_;
  std::string policy_;
  Win win_;
  WeightStoreStats stats_;
};

}  // namespace astraflow
