#pragma once
// Sparse bf16 weight deltas (docs/architecture.md §8): between two consecutive versions of one
// policy's packed weights (model/weight_blob.hpp — every byte after the header is bf16, and
// the header never changes), only the 16-bit words that differ bit for bit are sent.
//
// The codec treats a blob as an array of u16 words and splits it into chunks of
// `kDeltaChunkElements` words, encoded independently so that both encoding and applying run in
// parallel over slices of chunks (each slice encodes into its own buffer; the slices are copied
// into the delta in order). Per changed word:
//   varint(gap)    gap = index − previous changed index − 1 (the first one counts from the chunk start)
//   varint(zigzag(new − old mod 2^16))  the new bf16 bit pattern as a difference to the old one:
//                  an optimiser step moves a bf16 weight by a few units in the last place, so this
//                  is one byte where the raw value would be two; NaN and ±0 patterns survive
//                  because the arithmetic is on bits, modulo 2^16.
//
// Delta layout (little-endian):
//   0   u32 magic "ADLT"            4  u32 format version (1)
//   8   i64 base version            16 i64 target version
//   24  u64 word count              32 u64 XXH3 of the base blob
//   40  u64 XXH3 of the target blob 48 u64 changed words
//   56  u32 words per chunk         60 u32 flags (bit 0: body is zstd-compressed)
//   64  u64 stored body bytes       72 u64 raw body bytes
//   80  u64 XXH3 of bytes [0, 80) and the stored body (the payload checksum)
//   88  body: u64 entry offset per chunk plus one (relative to the entries), then the entries.
//
// Applying checks, before anything is written: the payload checksum (a flipped byte or a
// truncated buffer), the header, that the reader is on the base version with the base
// checksum, and every chunk's entries (bounds, varint lengths, the changed count). After
// writing, the target checksum must hold; if it does not, the blob is no longer trustworthy and
// the caller resynchronises with a full version.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "astraflow/core/error.hpp"

namespace astraflow {

constexpr std::uint32_t kDeltaChunkElements = 1u << 16;
constexpr std::size_t kDeltaHeaderBytes = 88;

// A delta that must not (or could not) be applied; the message says why.
class DeltaError : public Error {
 public:
  using Error::Error;
};

struct DeltaEncodeOptions {
  bool zstd = false;     // compress the body with zstd (kept only when smaller)
  int zstd_level = 1;    // fast: the encode sits on the store host's publish path
  unsigned threads = 1;  // threads over slices of chunks, and zstd's workers (the entries do not depend on it)
};

struct DeltaSummary {
  std::int64_t base_version = -1;
  std::int64_t target_version = -1;
  std::uint64_t words = 0;           // u16 words in the blob
  std::uint64_t changed = 0;         // words that differ
  std::uint64_t raw_body_bytes = 0;  // chunk offsets + entries, before zstd
  std::uint64_t bytes = 0;           // the whole delta as shipped
  std::uint64_t target_hash = 0;
  bool zstd = false;
  double density() const { return words ? static_cast<double>(changed) / static_cast<double>(words) : 0.0; }
};

// XXH3-64 of a blob: the checksum deltas and the store agree on.
std::uint64_t weightsHash(std::span<const std::byte> blob);

// Encodes target relative to base (same size, a multiple of 2 bytes) into `out` (resized).
// `base_hash`/`target_hash` are the blobs' weightsHash when the caller already has them (0:
// computed here).
DeltaSummary encodeDelta(std::span<const std::byte> base, std::span<const std::byte> target, std::int64_t base_version,
                         std::int64_t target_version, std::vector<std::byte>& out,
                         const DeltaEncodeOptions& options = {}, std::uint64_t base_hash = 0,
                         std::uint64_t target_hash = 0);

// Reads and checks a delta's header and payload checksum only (no reader state needed).
DeltaSummary inspectDelta(std::span<const std::byte> delta);

// Applies `delta` in place to `blob`, which must hold version `blob_version` with checksum
// `blob_hash`. Throws DeltaError (blob untouched) for a corrupt, truncated, wrong-version or
// wrong-base delta; throws DeltaError after writing only when the result's checksum is wrong.
// `threads` split the checks and the writes over slices of chunks.
DeltaSummary applyDelta(std::span<std::byte> blob, std::int64_t blob_version, std::uint64_t blob_hash,
                        std::span<const std::byte> delta, unsigned threads = 1);

}  // namespace astraflow
