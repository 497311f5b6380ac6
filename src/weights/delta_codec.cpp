// Sparse bf16 weight deltas: encode and apply in parallel over slices of chunks, with every
// check a corrupt, truncated or wrong-base delta must fail before a byte is written.
#include "astraflow/weights/delta_codec.hpp"

#include <fmt/format.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <thread>

namespace astraflow {

namespace {

constexpr std::uint32_t kMagic = 0x544c4441;  // "ADLT" read as little-endian u32
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint32_t kFlagZstd = 1;
constexpr std::size_t kHashedHeaderBytes = 80;  // the payload checksum covers these and the body

// Splits [0, chunks) into at most `threads` contiguous slices and runs slice(t, first, end) for
// each on its own thread (the calling thread takes the first). Chunks are encoded and applied
// independently, so slices share only read-only inputs and write disjoint outputs. A plain
// thread per slice: an encode or an apply is one or two large passes, beside which the ~50 µs a
// thread takes to start is nothing, and no pool outlives the call.
template <class Slice>
unsigned forEachSlice(std::uint64_t chunks, unsigned threads, const Slice& slice) {
  const auto n = static_cast<unsigned>(std::clamp<std::uint64_t>(threads, 1, std::max<std::uint64_t>(chunks, 1)));
  auto run = [&](unsigned t) { slice(t, chunks * t / n, chunks * (t + 1) / n); };
  std::vector<std::jthread> others;
  others.reserve(n - 1);
  for (unsigned t = 1; t < n; ++t) others.emplace_back(run, t);
  run(0);
  return n;
}

template <class Body>
void forEachChunk(std::uint64_t chunks, unsigned threads, const Body& body) {
  forEachSlice(chunks, threads, [&](unsigned, std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t c = first; c < end; ++c) body(c);
  });
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

// Writes v (below 2^21: every gap and difference here is below 2^17) as a varint of 1-3 bytes
// without a branch: four bytes are stored and the pointer moves by the varint's length, so the
// caller leaves a byte of slack past the worst case. A branch per byte mispredicted about once
// per change at 1 % density.
inline std::uint8_t* putVarint(std::uint8_t* p, std::uint32_t v) {
  const std::uint32_t two = v >= (1u << 7), three = v >= (1u << 14);
  const std::uint32_t bytes =
      (v & 0x7fu) | (two << 7) | ((v >> 7 & 0x7fu) << 8) | (three << 15) | ((v >> 14 & 0x7fu) << 16);
  static_assert(std::endian::native == std::endian::little, "the varint's bytes are stored as a little-endian u32");
  std::memcpy(p, &bytes, 4);
  return p + 1 + two + three;
}

// Reads a varint of at most 3 bytes (every value here is below 2^17) without passing `end`.
inline bool getVarint(const std::uint8_t*& p, const std::uint8_t* end, std::uint32_t& v) {
  v = 0;
  for (int shift = 0; shift < 21; shift += 7) {
    if (p == end) return false;
    const std::uint8_t b = *p++;
    v |= static_cast<std::uint32_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

inline std::uint32_t zigzag(std::uint16_t diff) {
  const auto s = static_cast<std::int16_t>(diff);
  return static_cast<std::uint32_t>((static_cast<std::int32_t>(s) << 1) ^ (static_cast<std::int32_t>(s) >> 31)) &
         0x1ffffu;
}
inline std::uint16_t unzigzag(std::uint32_t z) {
  return static_cast<std::uint16_t>(static_cast<std::int32_t>(z >> 1) ^ -static_cast<std::int32_t>(z & 1));
}

// Blocks of 16 words (32 bytes) are compared at once; at 1 % density about 85 % of them are
// equal, and a block that differs is walked by the bits of its difference mask, without a
// branch per word.
constexpr std::uint64_t kBlockWords = 16;

inline bool blockDiffers(const std::uint16_t* base, const std::uint16_t* target) {
  std::uint64_t a[4], b[4];
  std::memcpy(a, base, 32);
  std::memcpy(b, target, 32);
  return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) != 0;
}

// Bit k set where word k of the first n (≤ 16) differs.
inline std::uint32_t diffMask(const std::uint16_t* base, const std::uint16_t* target, std::uint64_t n) {
  std::uint32_t m = 0;
  for (std::uint64_t k = 0; k < n; ++k) m |= static_cast<std::uint32_t>(base[k] != target[k]) << k;
  return m;
}

// The entries of one chunk [begin, end), written at `out` (room for 6 bytes per word and one of
// slack); returns the end of what was written and adds the changed words to `changed`, once:
// the slices' counters share a cache line.
inline std::uint8_t* encodeChunk(const std::uint16_t* base, const std::uint16_t* target, std::uint64_t begin,
                                 std::uint64_t end, std::uint8_t* out, std::uint64_t& changed_total) {
  std::uint64_t prev_next = begin;  // index right after the previous change (the gap origin)
  std::uint64_t changed = 0;
  for (std::uint64_t i = begin; i < end; i += kBlockWords) {
    const std::uint64_t n = std::min(kBlockWords, end - i);
    if (n == kBlockWords && !blockDiffers(base + i, target + i)) continue;
    for (std::uint32_t m = diffMask(base + i, target + i, n); m != 0; m &= m - 1) {
      const std::uint64_t j = i + static_cast<std::uint64_t>(__builtin_ctz(m));
      out = putVarint(putVarint(out, static_cast<std::uint32_t>(j - prev_next)),
                      zigzag(static_cast<std::uint16_t>(target[j] - base[j])));
      prev_next = j + 1;
      ++changed;
    }
  }
  changed_total += changed;
  return out;
}

// One slice's entries, grown a chunk's worst case at a time and never zero-filled: the encode
// writes each change once, here, and the slices are then copied into the delta one after another.
class SliceBytes {
 public:
  std::uint8_t* room(std::uint64_t more) {
    if (size_ + more > capacity_) {
      const std::uint64_t capacity = std::max(2 * capacity_, size_ + more);
      auto grown = std::make_unique_for_overwrite<std::uint8_t[]>(capacity);
      if (size_) std::memcpy(grown.get(), bytes_.get(), size_);
      bytes_ = std::move(grown);
      capacity_ = capacity;
    }
    return bytes_.get() + size_;
  }
  void wrote(const std::uint8_t* end) { size_ = static_cast<std::uint64_t>(end - bytes_.get()); }
  const std::uint8_t* data() const { return bytes_.get(); }
  std::uint64_t size() const { return size_; }

 private:
  std::unique_ptr<std::uint8_t[]> bytes_;
  std::uint64_t size_ = 0, capacity_ = 0;
};

// Decodes one chunk's entries; with apply == false only validates them. Returns the number of
// entries, or −1 if they run past the chunk or the buffer.
inline std::int64_t decodeChunk(const std::uint8_t* p, const std::uint8_t* end, std::uint64_t begin,
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

// The raw body — the chunk index, then every chunk's entries — of the delta base → target
// (`words` u16 words), written into `out` after the header's room. One pass: each slice of chunks
// encodes into its own buffer, recording where each chunk starts in it; the slices are then
// copied in order. Returns the changed words.
std::uint64_t writeBody(const std::uint16_t* b, const std::uint16_t* t, std::uint64_t words, unsigned threads,
                        std::vector<std::byte>& out) {
  const std::uint64_t chunks = chunkCount(words, kDeltaChunkElements);
  auto chunkEnd = [words](std::uint64_t c) { return std::min<std::uint64_t>((c + 1) * kDeltaChunkElements, words); };
  std::vector<std::uint64_t> index(chunks + 1);
  std::vector<SliceBytes> slices(std::max(1u, threads));
  std::vector<std::uint64_t> slice_changed(slices.size());
  const unsigned used = forEachSlice(chunks, threads, [&](unsigned s, std::uint64_t first, std::uint64_t end) {
    SliceBytes& bytes = slices[s];
    for (std::uint64_t c = first; c < end; ++c) {
      index[c] = bytes.size();
      const std::uint64_t begin = c * kDeltaChunkElements;
      bytes.wrote(encodeChunk(b, t, begin, chunkEnd(c), bytes.room(6 * (chunkEnd(c) - begin) + 1), slice_changed[s]));
    }
  });
  // The slices one after another: chunk offsets become relative to the first entry.
  std::uint64_t entry_bytes = 0, changed = 0;
  for (unsigned s = 0; s < used; ++s) {
    const std::uint64_t first = chunks * s / used, end = chunks * (s + 1) / used;
    for (std::uint64_t c = first; c < end; ++c) index[c] += entry_bytes;
    entry_bytes += slices[s].size();
    changed += slice_changed[s];
  }
  index[chunks] = entry_bytes;

  const std::uint64_t index_bytes = 8 * (chunks + 1);
  out.resize(kDeltaHeaderBytes + index_bytes + entry_bytes);
  std::byte* body = out.data() + kDeltaHeaderBytes;
  std::memcpy(body, index.data(), index_bytes);
  std::byte* entries = body + index_bytes;
  for (unsigned s = 0; s < used; ++s) {
    if (slices[s].size()) std::memcpy(entries, slices[s].data(), slices[s].size());
    entries += slices[s].size();
  }
  return changed;
}

// Compresses the body after the header in place when zstd makes it smaller; returns zstd's size
// (not smaller: the body is left as it was).
std::size_t compressBody(std::vector<std::byte>& out, const DeltaEncodeOptions& options) {
  std::byte* body = out.data() + kDeltaHeaderBytes;
  const std::size_t raw_body = out.size() - kDeltaHeaderBytes;
  std::vector<std::byte> packed(ZSTD_compressBound(raw_body));
  const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  if (!cctx) throw DeltaError("delta: zstd: out of memory");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, options.zstd_level);
  // zstd's own workers where the library has them; a single-threaded libzstd refuses the
  // setting and compresses on this thread, with the same format.
  if (options.threads > 1) ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_nbWorkers, static_cast<int>(options.threads));
  const std::size_t n = ZSTD_compress2(cctx.get(), packed.data(), packed.size(), body, raw_body);
  if (ZSTD_isError(n)) throw DeltaError(fmt::format("delta: zstd: {}", ZSTD_getErrorName(n)));
  if (n < raw_body) {
    std::memcpy(body, packed.data(), n);
    out.resize(kDeltaHeaderBytes + n);
  }
  return n;
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
  const std::uint64_t words = base.size() / 2;
  const std::uint64_t changed =
      writeBody(reinterpret_cast<const std::uint16_t*>(base.data()),
                reinterpret_cast<const std::uint16_t*>(target.data()), words, options.threads, out);
  const std::uint64_t raw_body = out.size() - kDeltaHeaderBytes;
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
    if (const std::size_t n = compressBody(out, options); n < raw_body) {
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
                        std::span<const std::byte> delta, unsigned threads) {
  const DeltaSummary s = inspectDelta(delta);
  const Header h = readHeader(delta.data());
  if (h.words * 2 != blob.size()) {
    throw DeltaError(fmt::format("delta: made for {} bytes of weights, this replica has {}", h.words * 2, blob.size()));
  }
  if (h.base_version != blob_version || h.base_hash != blob_hash) {
    throw DeltaError(fmt::format("delta: applies to v{} (checksum {:016x}), this replica holds v{} ({:016x})",
                                 h.base_version, h.base_hash, blob_version, blob_hash));
  }
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

  auto chunkEnd = [words](std::uint64_t c) { return std::min<std::uint64_t>((c + 1) * kDeltaChunkElements, words); };

  // Validate every chunk before the first write: a malformed delta is never partly applied.
  std::vector<std::int64_t> found(chunks);
  forEachChunk(chunks, threads, [&](std::uint64_t c) {
    found[c] =
        decodeChunk(entries + off[c], entries + off[c + 1], c * kDeltaChunkElements, chunkEnd(c), nullptr, false);
  });
  std::uint64_t entries_seen = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (found[c] < 0) throw DeltaError(fmt::format("delta: chunk {} has malformed entries", c));
    entries_seen += static_cast<std::uint64_t>(found[c]);
  }
  if (entries_seen != h.changed) {
    throw DeltaError(fmt::format("delta: {} entries, the header says {}", entries_seen, h.changed));
  }
  forEachChunk(chunks, threads, [&](std::uint64_t c) {
    decodeChunk(entries + off[c], entries + off[c + 1], c * kDeltaChunkElements, chunkEnd(c), w, true);
  });
  if (weightsHash(blob) != h.target_hash) {
    throw DeltaError(
        fmt::format("delta: v{} checksum mismatch after applying (replica must resync)", h.target_version));
  }
  return s;
}

}  // namespace astraflow
