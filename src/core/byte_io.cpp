// ByteReader's checked reads (counts, strings, blobs, finish) and ByteWriter's appends: the one place that decides
// what "truncated" means for bytes from another process or the network (core/byte_io.hpp).
#include "astraflow/core/byte_io.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace astraflow {

bool ByteReader::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return false;
}

bool ByteReader::need(std::uint64_t bytes, const char* field) {
  if (failed()) return false;
  if (bytes > remaining()) {
    return fail(fmt::format("{}: truncated at byte {} reading {} (need {}, have {})", what_, offset(), field, bytes,
                            remaining()));
  }
  return true;
}

bool ByteReader::getCount(std::uint32_t& n, std::size_t min_item_bytes, const char* field) {
  if (!get(n, field)) return false;
  const std::uint64_t at_least = std::uint64_t(n) * min_item_bytes;  // <= 2^32 * small: no overflow
  if (at_least > remaining()) {
    return fail(fmt::format("{}: truncated at byte {} reading {} (need {}, have {})", what_, offset(), field, at_least,
                            remaining()));
  }
  return true;
}

bool ByteReader::getString(std::string& out, const char* field) {
  std::uint32_t n = 0;
  if (!get(n, field)) return false;
  if (n > remaining()) {
    return fail(fmt::format("{}: {}: string of {} bytes exceeds the message ({} left at byte {})", what_, field, n,
                            remaining(), offset()));
  }
  out.assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
  pos_ += n;
  return true;
}

bool ByteReader::getBytes(std::span<const std::byte>& out, std::size_t n, const char* field) {
  if (!need(n, field)) return false;
  out = data_.subspan(pos_, n);
  pos_ += n;
  return true;
}

bool ByteReader::getBlob(std::span<const std::byte>& out, const char* field) {
  std::uint64_t n = 0;
  if (!get(n, field)) return false;
  if (n > remaining()) {
    return fail(fmt::format("{}: {}: blob of {} bytes exceeds the message ({} left at byte {})", what_, field, n,
                            remaining(), offset()));
  }
  return getBytes(out, static_cast<std::size_t>(n), field);
}

bool ByteReader::skip(std::size_t n, const char* field) {
  if (!need(n, field)) return false;
  pos_ += n;
  return true;
}

bool ByteReader::finish() {
  if (failed()) return false;
  if (remaining() != 0) {
    return fail(fmt::format("{}: {} trailing bytes after the last field (at byte {})", what_, remaining(), offset()));
  }
  return true;
}

ByteWriter& ByteWriter::putString(std::string_view s) {
  if (s.size() > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("ByteWriter: string over 4 GiB");
  put(static_cast<std::uint32_t>(s.size()));
  if (!s.empty()) std::memcpy(grow(s.size()), s.data(), s.size());
  return *this;
}

ByteWriter& ByteWriter::putBlob(std::span<const std::byte> b) {
  put(static_cast<std::uint64_t>(b.size()));
  return putBytes(b);
}

ByteWriter& ByteWriter::putBytes(std::span<const std::byte> b) {
  if (!b.empty()) std::memcpy(grow(b.size()), b.data(), b.size());
  return *this;
}

}  // namespace astraflow
