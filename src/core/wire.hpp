#pragma once
// The writer behind the record wire format (include/astraflow/core/records.hpp): it fills a
// buffer sized exactly by the encoder, so a record is one allocation (none when the caller's
// buffer suffices). Reading goes through ByteReader (core/byte_io.hpp), as every decoder does.
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

#include "astraflow/core/byte_io.hpp"
#include "astraflow/core/records.hpp"

namespace astraflow::wire {

template <class T>
concept Scalar = ByteScalar<T>;

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

// Records are read through core's one bounds-checked reader (astraflow/core/byte_io.hpp).
using Reader = ByteReader;

// Checks the header of the record starting at bytes[0]: magic, version, flags, and that the
// payload fits in bytes. On success returns true and sets record_bytes to header + payload
// (which may be fewer than bytes.size(): the caller decides whether that is trailing junk or the
// next record). On failure sets error to "<what>: ...".
bool readHeader(std::span<const std::byte> bytes, std::uint32_t expected_magic, std::string_view what,
                std::size_t& record_bytes, std::string& error);

void writeHeader(Writer& w, std::uint32_t magic, std::size_t payload_bytes, std::string_view what);

}  // namespace astraflow::wire
