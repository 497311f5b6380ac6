#pragma once
// The one bounds-checked reader of bytes that come from another process or the network (wire
// records, the cross-site protocol, weight blobs, UCX frames), and the writer that appends what
// it reads. Every decoder goes through ByteReader, so one piece of code decides what "truncated"
// means, and the mutation fuzz tests (tests/core/test_records.cpp, tests/dataflow/
// test_site_protocol.cpp, tests/model/test_weight_blob.cpp) cover all of them.
//
// Byte order: scalars are copied with memcpy in host order; the build refuses hosts that are not
// little-endian with IEEE 754 floats (every machine astraflow targets is one), which keeps
// per-token arrays a single bulk copy on the rollout hot path.
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace astraflow {

static_assert(std::endian::native == std::endian::little,
              "astraflow's byte formats are little-endian and copied with memcpy; port byte_io.hpp first");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4, "IEEE 754 binary32 float required");
static_assert(std::numeric_limits<double>::is_iec559 && sizeof(double) == 8, "IEEE 754 binary64 double required");

template <class T>
concept ByteScalar = std::is_arithmetic_v<T> && !std::same_as<T, bool>;

// Reads one message's bytes. Each get* either fills its output and advances, or records the
// first error and returns false; nothing is read after an error, and nothing throws. Counts are
// checked against the bytes left before any container is resized, so the largest allocation is
// bounded by the message's own size. Messages name `what`, the field and the byte offset
// (counted from `base_offset`, e.g. the start of a record whose header was read elsewhere).
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> data, std::string_view what, std::size_t base_offset = 0)
      : data_(data), what_(what), base_(base_offset) {}

  template <ByteScalar T>
  bool get(T& out, const char* field) {
    if (!need(sizeof(T), field)) return false;
    std::memcpy(&out, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  // A u32 count of items each at least min_item_bytes long; refused when they cannot fit in
  // the bytes that remain.
  bool getCount(std::uint32_t& n, std::size_t min_item_bytes, const char* field);
  // u32 length + bytes.
  bool getString(std::string& out, const char* field);
  // u32 count + packed elements.
  template <ByteScalar T>
  bool getArray(std::vector<T>& out, const char* field) {
    std::uint32_t n = 0;
    if (!getCount(n, sizeof(T), field)) return false;
    out.resize(n);
    if (n != 0) std::memcpy(out.data(), data_.data() + pos_, std::size_t(n) * sizeof(T));
    pos_ += std::size_t(n) * sizeof(T);
    return true;
  }
  // The next n bytes as a view into the message (no copy).
  bool getBytes(std::span<const std::byte>& out, std::size_t n, const char* field);
  // u64 length + bytes, as a view.
  bool getBlob(std::span<const std::byte>& out, const char* field);
  // Skips n bytes (padding).
  bool skip(std::size_t n, const char* field);
  // Requires that every byte was read: false (with an error naming the leftover) otherwise.
  bool finish();

  // Records an error (the first one wins) and returns false.
  bool fail(std::string message);

  // The unread bytes, for a nested record whose length its own header gives.
  std::span<const std::byte> rest() const { return data_.subspan(pos_); }
  // Offset of the next unread byte, from base_offset.
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

// Appends scalars, strings (u32 length + bytes), blobs (u64 length + bytes) and raw bytes to a
// growable buffer: the writing side of the formats ByteReader reads. (Wire records are written
// into an exactly sized buffer by their own encoder instead: core/wire.hpp.)
class ByteWriter {
 public:
  template <ByteScalar T>
  ByteWriter& put(T v) {
    std::memcpy(grow(sizeof v), &v, sizeof v);
    return *this;
  }
  ByteWriter& putString(std::string_view s);
  ByteWriter& putBlob(std::span<const std::byte> b);
  ByteWriter& putBytes(std::span<const std::byte> b);
  template <ByteScalar T>
  ByteWriter& putArray(const std::vector<T>& v) {
    put(static_cast<std::uint32_t>(v.size()));
    if (!v.empty()) std::memcpy(grow(v.size() * sizeof(T)), v.data(), v.size() * sizeof(T));
    return *this;
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  std::vector<std::byte> take() { return std::move(bytes_); }  // leaves the writer empty
  std::size_t size() const { return bytes_.size(); }
  void clear() { bytes_.clear(); }

 private:
  std::byte* grow(std::size_t n) {
    const auto at = bytes_.size();
    bytes_.resize(at + n);
    return bytes_.data() + at;
  }
  std::vector<std::byte> bytes_;
};

}  // namespace astraflow
