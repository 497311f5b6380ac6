#pragma once
// Low-level byte writer and bounds-checked reader behind the record wire format
// (include/astraflow/core/records.hpp).
//
// Byte order: scalars are copied with memcpy in host order, and the build refuses hosts that are
// not little-endian with IEEE 754 floats. Every machine astraflow targets (x86-64, aarch64,
// ppc64le) is one; memcpy keeps the per-token arrays a single bulk copy instead of a loop of
// byte shifts on the rollout hot path.
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "astraflow/core/records.hpp"

namespace astraflow::wire {

static_assert(std::endian::native == std::endian::little,
              "the astraflow wire format is little-endian and is copied with memcpy; port wire.hpp first");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4, "IEEE 754 binary32 float required");
static_assert(std::numeric_limits<double>::is_iec559 && sizeof(double) == 8, "IEEE 754 binary64 double required");

template <class T>
concept Scalar = std::is_arithmetic_v<T> && !std::same_as<T, bool>;

// Four ASCII characters, stored in that order on the wire.
constexpr std::uint32_t magic(const char (&s)[5]) {
  return std::uint32_t(std::uint8_t(s[0])) | std::uint32_t(std::uint8_t(s[1])) << 8 |
         std::uint32_t(std::uint8_t(s[2])) << 16 | std::uint32_t(std::uint8_t(s[3])) << 24;
}

inline constexpr std::uint32_t kTaskMagic = magic("ATSK");
inline constexpr std::uint32_t kTrajectoryMagic = magic("ATRJ");
inline constexpr std::uint32_t kBatchMagic = magic("ABAT");

// Bytes a string or vector takes on the wire.
inline std::size_t sizeOf(std::string_view s) { return 4 + s.size(); }
template <Scalar T>
std::size_t sizeOf(const std::vector<T>& v) {
  return 4 + v.size() * sizeof(T);
}

// Writes into a buffer already sized to the exact encoded size. Overrunning it means the size
// computation and the writer disagree: a bug here, reported as logic_error rather than
// corrupting memory.
class Writer {
 public:
  explicit Writer(std::span<std::byte> dst) : p_(dst.data()), end_(dst.data() + dst.size()) {}

  template <Scalar T>
  void put(T v) {
    std::memcpy(reserve(sizeof v), &v, sizeof v);
  }
  void putCount(std::size_t n) {
    // Unreachable for records whose payload passed the 4 GiB check, kept as the last guard.
    if (n > std::numeric_limits<std::uint32_t>::max()) throw std::logic_error("wire: count exceeds u32");
    put(std::uint32_t(n));
  }
  void putString(std::string_view s) {
    putCount(s.size());
    if (!s.empty()) std::memcpy(reserve(s.size()), s.data(), s.size());
  }
  template <Scalar T>
  void putArray(const std::vector<T>& v) {
    putCount(v.size());
    if (!v.empty()) std::memcpy(reserve(v.size() * sizeof(T)), v.data(), v.size() * sizeof(T));
  }
  // A region of n bytes that the caller fills (nested records).
  std::span<std::byte> take(std::size_t n) { return {reserve(n), n}; }
  bool full() const { return p_ == end_; }

 private:
  std::byte* reserve(std::size_t n) {
    if (std::size_t(end_ - p_) < n) throw std::logic_error("wire: encoder wrote past the computed size");
    std::byte* at = p_;
    p_ += n;
    return at;
  }

  std::byte* p_;
  std::byte* end_;
};

// Reads one record's bytes. Each get* either fills its output and advances, or records the
// first error and returns false; nothing is read after an error. Counts are checked against
// the bytes left before any container is resized, so the largest allocation is bounded by the
// record's own size.
class Reader {
 public:
  // what: the record kind for messages ("trajectory"); offset: where data starts in the record,
  // so messages give offsets from the record's first byte.
  Reader(std::span<const std::byte> data, std::string_view what, std::size_t offset)
      : data_(data), what_(what), base_(offset) {}

  template <Scalar T>
  bool get(T& out, const char* field) {
    if (!need(sizeof(T), field)) return false;
    std::memcpy(&out, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  // A u32 count of items each at least min_item_bytes long; refused when they cannot fit in
  // the bytes that remain.
  bool getCount(std::uint32_t& n, std::size_t min_item_bytes, const char* field);

  bool getString(std::string& out, const char* field);

  template <Scalar T>
  bool getArray(std::vector<T>& out, const char* field) {
    std::uint32_t n = 0;
    if (!getCount(n, sizeof(T), field)) return false;
    out.resize(n);
    if (n != 0) std::memcpy(out.data(), data_.data() + pos_, std::size_t(n) * sizeof(T));
    pos_ += std::size_t(n) * sizeof(T);
    return true;
  }

  // The next n bytes as a sub-span (nested records); false when fewer remain.
  bool getBytes(std::span<const std::byte>& out, std::size_t n, const char* field);

  // Records an error (the first one wins) and returns false.
  bool fail(std::string message);

  // The unread bytes, for a nested record whose length its own header gives.
  std::span<const std::byte> rest() const { return data_.subspan(pos_); }
  // Offset from the record's first byte of the next unread byte.
  std::size_t offset() const { return base_ + pos_; }
  std::size_t remaining() const { return data_.size() - pos_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  bool need(std::uint64_t bytes, const char* field);

  std::span<const std::byte> data_;
  std::string_view what_;
  std::size_t base_;
  std::size_t pos_ = 0;
  std::string error_;
};

// Checks the header of the record starting at bytes[0]: magic, version, flags, and that the
// payload fits in bytes. On success returns true and sets record_bytes to header + payload
// (which may be fewer than bytes.size(): the caller decides whether that is trailing junk or the
// next record). On failure sets error to "<what>: ...".
bool readHeader(std::span<const std::byte> bytes, std::uint32_t expected_magic, std::string_view what,
                std::size_t& record_bytes, std::string& error);

void writeHeader(Writer& w, std::uint32_t magic, std::size_t payload_bytes, std::string_view what);

}  // namespace astraflow::wire
