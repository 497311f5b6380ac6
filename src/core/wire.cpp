// The header of every wire record (magic, format version, flags, payload size): writeHeader, and readHeader, whose
// errors name the kind of record a wrong magic belongs to (task, trajectory, batch).
#include "core/wire.hpp"

#include <fmt/format.h>

#include <cctype>

namespace astraflow::wire {

namespace {

// "ATRJ" when printable, else hex, for messages about a magic.
std::string describeMagic(std::uint32_t m) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(m >> (8 * i));
    if (!std::isprint(c)) return fmt::format("0x{:08x}", m);
    s.push_back(static_cast<char>(c));
  }
  return "'" + s + "'";
}

const char* kindOfMagic(std::uint32_t m) {
  if (m == kTaskMagic) return "task";
  if (m == kTrajectoryMagic) return "trajectory";
  if (m == kBatchMagic) return "batch";
  return nullptr;
}

template <Scalar T>
T load(std::span<const std::byte> bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

}  // namespace

bool readHeader(std::span<const std::byte> bytes, std::uint32_t expected_magic, std::string_view what,
                std::size_t& record_bytes, std::string& error) {
  if (bytes.size() < 4) {
    error = fmt::format("{}: truncated header: {} bytes, the header needs {}", what, bytes.size(), kWireHeaderBytes);
    return false;
  }
  const auto magic = load<std::uint32_t>(bytes, 0);
  if (magic != expected_magic) {
    const char* other = kindOfMagic(magic);
    error =
        other ? fmt::format("{}: bad magic {}: this is a {} record, expected {}", what, describeMagic(magic), other,
                            describeMagic(expected_magic))
              : fmt::format("{}: bad magic {}, expected {}", what, describeMagic(magic), describeMagic(expected_magic));
    return false;
  }
  if (bytes.size() < kWireHeaderBytes) {
    error = fmt::format("{}: truncated header: {} bytes, the header needs {}", what, bytes.size(), kWireHeaderBytes);
    return false;
  }
  const auto version = load<std::uint16_t>(bytes, 4);
  const auto flags = load<std::uint16_t>(bytes, 6);
  const auto payload = load<std::uint32_t>(bytes, 8);
  if (version != kWireFormatVersion) {
    error = fmt::format("{}: unsupported format_version {} (this build reads {})", what, version, kWireFormatVersion);
    return false;
  }
  if (flags != 0) {
    error =
        fmt::format("{}: unsupported flags 0x{:04x} (format_version {} defines none)", what, flags, kWireFormatVersion);
    return false;
  }
  if (payload > bytes.size() - kWireHeaderBytes) {
    error = fmt::format("{}: payload_bytes {} but the record has {} after the {}-byte header", what, payload,
                        bytes.size() - kWireHeaderBytes, kWireHeaderBytes);
    return false;
  }
  record_bytes = kWireHeaderBytes + std::size_t(payload);
  return true;
}

void writeHeader(Writer& w, std::uint32_t magic, std::size_t payload_bytes, std::string_view what) {
  if (payload_bytes > std::numeric_limits<std::uint32_t>::max()) {
    throw std::logic_error(
        fmt::format("wire: {} payload of {} bytes reached the writer unchecked", what, payload_bytes));
  }
  w.put(magic);
  w.put(kWireFormatVersion);
  w.put(std::uint16_t{0});
  w.put(std::uint32_t(payload_bytes));
}

}  // namespace astraflow::wire
