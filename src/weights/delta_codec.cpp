#include "astraflow/weights/delta_codec.hpp"

#include <fmt/format.h>
#include <xxhash.h>
#include <zstd.h>
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace astraflow {

namespace {

constexpr std::uint32_t kMagic = 0x544c4441;  // "ADLT" read as little-endian u32
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint32_t kFlagZstd = 1;
constexpr std::size_t kHashedHeaderBytes = 80;  // the payload checksum covers these and the body

// Blobs live in host memory (the store's MPI window, a rollout rank's replica), so the kernels
// run on the host execution space: Serial in this build, OpenMP or Threads where Kokkos has it.
using HostSpace = Kokkos::DefaultHostExecutionSpace;
using ChunkPolicy = Kokkos::RangePolicy<HostSpace, Kokkos::IndexType<std::int64_t>>;

// Kokkos, initialised on first use, and held while a kernel runs: the dataflow rank encodes on a
// worker thread (WeightStore::advancePublish) while its loop may encode for a spawned pool's
// store, and a Serial execution space is not safe to dispatch from two threads at once.
std::unique_lock<std::mutex> kokkosSection() {
  static std::once_flag once;
  static std::mutex mutex;
  std::call_once(once, [] {
    if (!Kokkos::is_initialized()) {
      Kokkos::initialize();
      std::atexit([] {
        if (Kokkos::is_initialized()) Kokkos::finalize();
      });
    }
  });
  return std::unique_lock<std::mutex>(mutex);
}

struct Header {
  std::uint32_t magic, format;
  std::int64_t base_version, target_version;
  std::uint64_t words, base_hash, target_hash, changed;
  std::uint32_t chunk_words, flags;
  std::uint64_t body_bytes, raw_body_bytes, payload_hash;
};

template <class T>
void putField(std::byte* p, std::size_t offset, T v) {
  std::memcpy(p + offset, &v, sizeof v);
}
template <class T>
T getField(const std::byte* p, std::size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof v);
  return v;
}

void writeHeader(std::byte* p, const Header& h) {
  putField(p, 0, h.magic);
  putField(p, 4, h.format);
  putField(p, 8, h.base_version);
  putField(p, 16, h.target_version);
  putField(p, 24, h.words);
  putField(p, 32, h.base_hash);
  putField(p, 40, h.target_hash);
  putField(p, 48, h.changed);
  putField(p, 56, h.chunk_words);
  putField(p, 60, h.flags);
  putField(p, 64, h.body_bytes);
  putField(p, 72, h.raw_body_bytes);
  putField(p, 80, h.payload_hash);
}

Header readHeader(const std::byte* p) {
  return {getField<std::uint32_t>(p, 0),  getField<std::uint32_t>(p, 4),  getField<std::int64_t>(p, 8),
          getField<std::int64_t>(p, 16),  getField<std::uint64_t>(p, 24), getField<std::uint64_t>(p, 32),
          getField<std::uint64_t>(p, 40), getField<std::uint64_t>(p, 48), getField<std::uint32_t>(p, 56),
          getField<std::uint32_t>(p, 60), getField<std::uint64_t>(p, 64), getField<std::uint64_t>(p, 72),
          getField<std::uint64_t>(p, 80)};
}

std::uint64_t payloadHash(const std::byte* header, std::span<const std::byte> body) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, header, kHashedHeaderBytes);
  XXH3_64bits_update(state, body.data(), body.size());
  const std::uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

KOKKOS_INLINE_FUNCTION std::uint32_t varintBytes(std::uint32_t v) { return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : 3; }

KOKKOS_INLINE_FUNCTION std::uint8_t* putVarint(std::uint8_t* p, std::uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}

// Reads a varint of at most 3 bytes (every value here is below 2^17) without passing `end`.
KOKKOS_INLINE_FUNCTION bool getVarint(const std::uint8_t*& p, const std::uint8_t* end, std::uint32_t& v) {
  v = 0;
  for (int shift = 0; shift < 21; shift += 7) {
    if (p == end) return false;
    const std::uint8_t b = *p++;
    v |= static_cast<std::uint32_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

KOKKOS_INLINE_FUNCTION std::uint32_t zigzag(std::uint16_t diff) {
  const auto s = static_cast<std::int16_t>(diff);
  return static_cast<std::uint32_t>((static_cast<std::int32_t>(s) << 1) ^ (static_cast<std::int32_t>(s) >> 31)) &
         0x1ffffu;
}
KOKKOS_INLINE_FUNCTION std::uint16_t unzigzag(std::uint32_t z) {
  return static_cast<std::uint16_t>(static_cast<std::int32_t>(z >> 1) ^ -static_cast<std::int32_t>(z & 1));
}

struct ChunkCount {
  std::uint64_t bytes = 0, changed = 0;
};

// Blocks of 16 words (32 bytes) are compared at once; the counting pass marks the blocks that
// differ in a bitmap (one bit per block, 64 u64 per chunk), and the writing pass visits only
// those: at 1 % density most blocks are unchanged, so the model is compared once, not twice.
constexpr std::uint64_t kBlockWords = 16;
constexpr std::uint64_t kFlagWordsPerChunk = kDeltaChunkElements / kBlockWords / 64;

KOKKOS_INLINE_FUNCTION bool blockDiffers(const std::uint16_t* base, const std::uint16_t* target, std::uint64_t i,
                                         std::uint64_t end) {
  if (i + kBlockWords > end) return true;  // a ragged last block is always examined word by word
  std::uint64_t a[4], b[4];
  std::memcpy(a, base + i, 32);
  std::memcpy(b, target + i, 32);
  return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) != 0;
}

// Counting pass over one chunk [begin, end): entry bytes and changes; marks differing blocks.
KOKKOS_INLINE_FUNCTION ChunkCount countChunk(const std::uint16_t* base, const std::uint16_t* target,
                                             std::uint64_t begin, std::uint64_t end, std::uint64_t* flags) {
  ChunkCount c;
  std::uint64_t prev_next = begin;  // index right after the previous change (the gap origin)
  for (std::uint64_t i = begin, block = 0; i < end; i += kBlockWords, ++block) {
    if (!blockDiffers(base, target, i, end)) continue;
    flags[block / 64] |= std::uint64_t{1} << (block % 64);
    const std::uint64_t stop = i + kBlockWords < end ? i + kBlockWords : end;
    for (std::uint64_t j = i; j < stop; ++j) {
      if (base[j] == target[j]) continue;
      c.bytes += varintBytes(static_cast<std::uint32_t>(j - prev_next)) +
                 varintBytes(zigzag(static_cast<std::uint16_t>(target[j] - base[j])));
      c.changed++;
      prev_next = j + 1;
    }
  }
  return c;
}

// Writing pass: the entries of the marked blocks only.
KOKKOS_INLINE_FUNCTION void writeChunk(const std::uint16_t* base, const std::uint16_t* target, std::uint64_t begin,
                                       std::uint64_t end, const std::uint64_t* flags, std::uint8_t* out) {
  std::uint64_t prev_next = begin;
  for (std::uint64_t f = 0; f < kFlagWordsPerChunk; ++f) {
    for (std::uint64_t bits = flags[f]; bits != 0; bits &= bits - 1) {
      const std::uint64_t i = begin + (f * 64 + static_cast<std::uint64_t>(__builtin_ctzll(bits))) * kBlockWords;
      const std::uint64_t stop = i + kBlockWords < end ? i + kBlockWords : end;
      for (std::uint64_t j = i; j < stop; ++j) {
        if (base[j] == target[j]) continue;
        out = putVarint(putVarint(out, static_cast<std::uint32_t>(j - prev_next)),
                        zigzag(static_cast<std::uint16_t>(target[j] - base[j])));
        prev_next = j + 1;
      }
    }
  }
}

// Decodes one chunk's entries; with apply == false only validates them. Returns the number of
// entries, or −1 if they run past the chunk or the buffer.
KOKKOS_INLINE_FUNCTION std::int64_t decodeChunk(const std::uint8_t* p, const std::uint8_t* end, std::uint64_t begin,
                                                std::uint64_t chunk_end, std::uint16_t* blob, bool apply) {
  std::int64_t n = 0;
  std::uint64_t next = begin;
  while (p != end) {
    std::uint32_t gap = 0, value = 0;
    if (!getVarint(p, end, gap) || !getVarint(p, end, value) || value > 0x1ffffu) return -1;
    const std::uint64_t i = next + gap;
    if (i >= chunk_end) return -1;
    if (apply) blob[i] = static_cast<std::uint16_t>(blob[i] + unzigzag(value));
    next = i + 1;
    ++n;
  }
  return n;
}

DeltaSummary summaryOf(const Header& h, std::uint64_t bytes) {
  DeltaSummary s;
  s.base_version = h.base_version;
  s.target_version = h.target_version;
  s.words = h.words;
  s.changed = h.changed;
  s.raw_body_bytes = h.raw_body_bytes;
  s.bytes = bytes;
  s.target_hash = h.target_hash;
  s.zstd = (h.flags & kFlagZstd) != 0;
  return s;
}

std::uint64_t chunkCount(std::uint64_t words, std::uint32_t chunk_words) {
  return (words + chunk_words - 1) / chunk_words;
}

}  // namespace

std::uint64_t weightsHash(std::span<const std::byte> blob) { return XXH3_64bits(blob.data(), blob.size()); }

DeltaSummary encodeDelta(std::span<const std::byte> base, std::span<const std::byte> target, std::int64_t base_version,
                         std::int64_t target_version, std::vector<std::byte>& out, const DeltaEncodeOptions& options,
                         std::uint64_t base_hash, std::uint64_t target_hash) {
  if (base.size() != target.size() || base.size() % 2 != 0) {
    throw DeltaError(fmt::format("delta: base ({} bytes) and target ({} bytes) must be the same even size", base.size(),
                                 target.size()));
  }
  const auto kokkos = kokkosSection();
  const std::uint64_t words = base.size() / 2;
  const std::uint64_t chunks = chunkCount(words, kDeltaChunkElements);
  const auto* b = reinterpret_cast<const std::uint16_t*>(base.data());
  const auto* t = reinterpret_cast<const std::uint16_t*>(target.data());

  // Pass 1: bytes and changes per chunk, and which blocks differ.
  Kokkos::View<std::uint64_t*, Kokkos::HostSpace> chunk_bytes("delta_chunk_bytes", chunks + 1);
  Kokkos::View<std::uint64_t*, Kokkos::HostSpace> flags("delta_block_flags", chunks * kFlagWordsPerChunk);
  std::uint64_t changed = 0;
  Kokkos::parallel_reduce(
      "delta_count", ChunkPolicy(0, static_cast<std::int64_t>(chunks)),
      KOKKOS_LAMBDA(std::int64_t c, std::uint64_t & sum) {
        const std::uint64_t begin = static_cast<std::uint64_t>(c) * kDeltaChunkElements;
        const std::uint64_t end = begin + kDeltaChunkElements < words ? begin + kDeltaChunkElements : words;
        const ChunkCount n = countChunk(b, t, begin, end, &flags(c * kFlagWordsPerChunk));
        chunk_bytes(c) = n.bytes;
        sum += n.changed;
      },
      changed);
  // Exclusive scan: each chunk's entry offset; the extra last slot receives the total.
  std::uint64_t entry_bytes = 0;
  Kokkos::parallel_scan(
      "delta_offsets", ChunkPolicy(0, static_cast<std::int64_t>(chunks + 1)),
      KOKKOS_LAMBDA(std::int64_t c, std::uint64_t & running, bool final) {
        const std::uint64_t mine = c < static_cast<std::int64_t>(chunks) ? chunk_bytes(c) : 0;
        if (final) chunk_bytes(c) = running;
        running += mine;
      },
      entry_bytes);

  const std::uint64_t index_bytes = 8 * (chunks + 1);
  const std::uint64_t raw_body = index_bytes + entry_bytes;
  out.resize(kDeltaHeaderBytes + raw_body);
  std::byte* body = out.data() + kDeltaHeaderBytes;
  std::memcpy(body, chunk_bytes.data(), index_bytes);
  auto* entries = reinterpret_cast<std::uint8_t*>(body + index_bytes);
  // Pass 2: every chunk writes its entries at its offset.
  Kokkos::parallel_for(
      "delta_encode", ChunkPolicy(0, static_cast<std::int64_t>(chunks)), KOKKOS_LAMBDA(std::int64_t c) {
        const std::uint64_t begin = static_cast<std::uint64_t>(c) * kDeltaChunkElements;
        const std::uint64_t end = begin + kDeltaChunkElements < words ? begin + kDeltaChunkElements : words;
        writeChunk(b, t, begin, end, &flags(c * kFlagWordsPerChunk), entries + chunk_bytes(c));
      });

  Header h{kMagic,
           kFormatVersion,
           base_version,
           target_version,
           words,
           base_hash ? base_hash : weightsHash(base),
           target_hash ? target_hash : weightsHash(target),
           changed,
           kDeltaChunkElements,
           0,
           raw_body,
           raw_body,
           0};
  if (options.zstd && raw_body > 0) {
    std::vector<std::byte> packed(ZSTD_compressBound(raw_body));
    const std::size_t n = ZSTD_compress(packed.data(), packed.size(), body, raw_body, options.zstd_level);
    if (ZSTD_isError(n)) throw DeltaError(fmt::format("delta: zstd: {}", ZSTD_getErrorName(n)));
    if (n < raw_body) {
      std::memcpy(body, packed.data(), n);
      out.resize(kDeltaHeaderBytes + n);
      h.flags |= kFlagZstd;
      h.body_bytes = n;
    }
  }
  writeHeader(out.data(), h);
  h.payload_hash = payloadHash(out.data(), std::span(out).subspan(kDeltaHeaderBytes));
  writeHeader(out.data(), h);
  return summaryOf(h, out.size());
}

DeltaSummary inspectDelta(std::span<const std::byte> delta) {
  if (delta.size() < kDeltaHeaderBytes) {
    throw DeltaError(
        fmt::format("delta: truncated ({} bytes, the header alone has {})", delta.size(), kDeltaHeaderBytes));
  }
  const Header h = readHeader(delta.data());
  if (h.magic != kMagic) throw DeltaError("delta: bad magic (not an astraflow weight delta)");
  if (h.format != kFormatVersion) {
    throw DeltaError(fmt::format("delta: format version {}, this build reads {}", h.format, kFormatVersion));
  }
  if (h.body_bytes != delta.size() - kDeltaHeaderBytes) {
    throw DeltaError(fmt::format("delta: header says {} body bytes, {} arrived (truncated or padded)", h.body_bytes,
                                 delta.size() - kDeltaHeaderBytes));
  }
  if (payloadHash(delta.data(), delta.subspan(kDeltaHeaderBytes)) != h.payload_hash) {
    throw DeltaError("delta: payload checksum mismatch (corrupted in transit)");
  }
  if (h.chunk_words != kDeltaChunkElements || (h.flags & ~kFlagZstd) != 0 || h.changed > h.words ||
      h.target_version <= h.base_version) {
    throw DeltaError(fmt::format("delta: inconsistent header (chunk {}, flags {:#x}, {} of {} changed, v{} -> v{})",
                                 h.chunk_words, h.flags, h.changed, h.words, h.base_version, h.target_version));
  }
  // Every entry is at most 3 + 3 bytes: a larger raw body is malformed, whatever zstd claims.
  const std::uint64_t index_bytes = 8 * (chunkCount(h.words, h.chunk_words) + 1);
  if (h.raw_body_bytes < index_bytes || h.raw_body_bytes > index_bytes + 6 * h.changed) {
    throw DeltaError(fmt::format("delta: raw body of {} bytes cannot hold {} changes", h.raw_body_bytes, h.changed));
  }
  return summaryOf(h, delta.size());
}

DeltaSummary applyDelta(std::span<std::byte> blob, std::int64_t blob_version, std::uint64_t blob_hash,
                        std::span<const std::byte> delta) {
  const DeltaSummary s = inspectDelta(delta);
  const Header h = readHeader(delta.data());
  if (h.words * 2 != blob.size()) {
    throw DeltaError(fmt::format("delta: made for {} bytes of weights, this replica has {}", h.words * 2, blob.size()));
  }
  if (h.base_version != blob_version || h.base_hash != blob_hash) {
    throw DeltaError(fmt::format("delta: applies to v{} (checksum {:016x}), this replica holds v{} ({:016x})",
                                 h.base_version, h.base_hash, blob_version, blob_hash));
  }
  const auto kokkos = kokkosSection();

  std::vector<std::byte> unpacked;
  std::span<const std::byte> body = delta.subspan(kDeltaHeaderBytes);
  if (h.flags & kFlagZstd) {
    unpacked.resize(h.raw_body_bytes);
    const std::size_t n = ZSTD_decompress(unpacked.data(), unpacked.size(), body.data(), body.size());
    if (ZSTD_isError(n) || n != h.raw_body_bytes) {
      throw DeltaError(fmt::format("delta: zstd body does not decompress to {} bytes ({})", h.raw_body_bytes,
                                   ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size"));
    }
    body = unpacked;
  } else if (body.size() != h.raw_body_bytes) {
    throw DeltaError("delta: stored and raw body sizes differ without compression");
  }

  const std::uint64_t chunks = chunkCount(h.words, h.chunk_words);
  const std::uint64_t index_bytes = 8 * (chunks + 1);
  const std::uint64_t entry_bytes = body.size() - index_bytes;
  std::vector<std::uint64_t> offsets(chunks + 1);
  std::memcpy(offsets.data(), body.data(), index_bytes);
  if (offsets[0] != 0 || offsets[chunks] != entry_bytes) {
    throw DeltaError("delta: chunk index does not span the entries");
  }
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (offsets[c + 1] < offsets[c]) throw DeltaError(fmt::format("delta: chunk index goes back at chunk {}", c));
  }
  const auto* entries = reinterpret_cast<const std::uint8_t*>(body.data() + index_bytes);
  const std::uint64_t* off = offsets.data();
  const std::uint64_t words = h.words;
  auto* w = reinterpret_cast<std::uint16_t*>(blob.data());

  // Validate every chunk before the first write: a malformed delta is never partly applied.
  Kokkos::View<std::int64_t*, Kokkos::HostSpace> found("delta_chunk_entries", chunks);
  Kokkos::parallel_for(
      "delta_validate", ChunkPolicy(0, static_cast<std::int64_t>(chunks)), KOKKOS_LAMBDA(std::int64_t c) {
        const std::uint64_t begin = static_cast<std::uint64_t>(c) * kDeltaChunkElements;
        const std::uint64_t end = begin + kDeltaChunkElements < words ? begin + kDeltaChunkElements : words;
        found(c) = decodeChunk(entries + off[c], entries + off[c + 1], begin, end, nullptr, false);
      });
  std::uint64_t entries_seen = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (found(c) < 0) throw DeltaError(fmt::format("delta: chunk {} has malformed entries", c));
    entries_seen += static_cast<std::uint64_t>(found(c));
  }
  if (entries_seen != h.changed) {
    throw DeltaError(fmt::format("delta: {} entries, the header says {}", entries_seen, h.changed));
  }
  Kokkos::parallel_for(
      "delta_apply", ChunkPolicy(0, static_cast<std::int64_t>(chunks)), KOKKOS_LAMBDA(std::int64_t c) {
        const std::uint64_t begin = static_cast<std::uint64_t>(c) * kDeltaChunkElements;
        const std::uint64_t end = begin + kDeltaChunkElements < words ? begin + kDeltaChunkElements : words;
        decodeChunk(entries + off[c], entries + off[c + 1], begin, end, w, true);
      });
  if (weightsHash(blob) != h.target_hash) {
    throw DeltaError(
        fmt::format("delta: v{} checksum mismatch after applying (replica must resync)", h.target_version));
  }
  return s;
}

}  // namespace astraflow
