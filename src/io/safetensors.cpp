// Safetensors reading (memory-mapped, validated whole before use) and writing (atomic).
#include "astraflow/io/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

namespace astraflow::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader maps it without byte swapping");

namespace {

using nlohmann::json;

// The format's own cap on the header (safetensors' MAX_HEADER_SIZE): a larger length field is a
// corrupt file, not a reason to read 2^64 bytes.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  StDtype dtype;
  const char* name;
  std::size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {StDtype::F64, "F64", 8}, {StDtype::F32, "F32", 4},   {StDtype::F16, "F16", 2}, {StDtype::BF16, "BF16", 2},
    {StDtype::I64, "I64", 8}, {StDtype::I32, "I32", 4},   {StDtype::I16, "I16", 2}, {StDtype::I8, "I8", 1},
    {StDtype::U8, "U8", 1},   {StDtype::Bool, "BOOL", 1},
};

const DtypeInfo& infoOf(StDtype d) {
  for (const auto& i : kDtypes)
    if (i.dtype == d) return i;
  throw Error("safetensors: unknown dtype enum");
}

std::string allowedDtypes() {
  std::string s;
  for (const auto& i : kDtypes) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

[[noreturn]] void refuse(const std::string& label, const std::string& what) {
  throw Error(fmt::format("safetensors {}: {}", label, what));
}

// numel × dtype size, refusing shapes whose byte count overflows.
std::uint64_t byteCount(const std::vector<std::int64_t>& shape, std::size_t elem, const std::string& label,
                        const std::string& name) {
  std::uint64_t n = elem;
  for (auto d : shape) {
    if (d < 0) refuse(label, fmt::format("tensor '{}': negative dimension {}", name, d));
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d)) {
      refuse(label, fmt::format("tensor '{}': shape too large", name));
    }
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

}  // namespace

std::size_t dtypeBytes(StDtype dtype) { return infoOf(dtype).bytes; }
const char* dtypeName(StDtype dtype) { return infoOf(dtype).name; }

std::int64_t StTensorView::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("safetensors {}: cannot open: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(fmt::format("safetensors {}: cannot stat: {}", path.string(), std::strerror(err)));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);  // copy-on-write
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("safetensors {}: cannot map: {}", path.string(), std::strerror(err)));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the map keeps the file
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto map = std::make_shared<MappedFile>(path);
  SafetensorsFile f = parse(map->bytes(), path.string());
  f.map_ = std::move(map);
  return f;
}

namespace {

// The JSON header after the 8-byte length; its length is returned in `header_len`. Duplicate
// names are refused here: a JSON object would silently keep one of them.
json parseHeader(std::span<const std::byte> bytes, const std::string& label, std::uint64_t& header_len) {
  if (bytes.size() < 8) refuse(label, fmt::format("{} bytes: shorter than the 8-byte header length", bytes.size()));
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes)
    refuse(label, fmt::format("header length {} is past the format's limit", header_len));
  if (8 + header_len > bytes.size()) {
    refuse(label, fmt::format("header of {} bytes runs past the end of the file ({} bytes)", header_len, bytes.size()));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  if (text.empty() || text.front() != '{') refuse(label, "the header is not a JSON object");
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    header = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second) {
        duplicate = parsed.get<std::string>();
      }
      return true;
    });
  } catch (const json::parse_error& e) {
    refuse(label, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!duplicate.empty()) refuse(label, fmt::format("tensor '{}' is named twice in the header", duplicate));
  if (!header.is_object()) refuse(label, "the header is not a JSON object");
  return header;
}

// Where a tensor's bytes lie in the data buffer.
struct Span {
  std::uint64_t begin, end;
  std::size_t index;
};

// One header entry as a view of the data buffer: a known dtype, an integer shape, and
// data_offsets inside the buffer that hold exactly the shape's bytes.
StTensorView readTensor(const std::string& name, const json& value, std::span<const std::byte> data,
                        const std::string& label, Span& span) {
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets")) {
    refuse(label, fmt::format("tensor '{}': needs dtype, shape and data_offsets", name));
  }
  StTensorView t;
  t.name = name;
  const auto& dtype = value["dtype"];
  const DtypeInfo* info = nullptr;
  if (dtype.is_string()) {
    for (const auto& i : kDtypes)
      if (dtype.get<std::string>() == i.name) info = &i;
  }
  if (!info) refuse(label, fmt::format("tensor '{}': dtype {} is not one of {}", name, dtype.dump(), allowedDtypes()));
  t.dtype = info->dtype;
  const auto& shape = value["shape"];
  if (!shape.is_array()) refuse(label, fmt::format("tensor '{}': shape is not a list", name));
  for (const auto& d : shape) {
    if (!d.is_number_integer())
      refuse(label, fmt::format("tensor '{}': shape {} holds a non-integer", name, shape.dump()));
    t.shape.push_back(d.get<std::int64_t>());
  }
  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    refuse(label, fmt::format("tensor '{}': data_offsets is not [begin, end]", name));
  }
  const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
  if (begin > end || end > data.size()) {
    refuse(label, fmt::format("tensor '{}': data_offsets [{}, {}] are outside the {}-byte data buffer", name, begin,
                              end, data.size()));
  }
  const std::uint64_t want = byteCount(t.shape, info->bytes, label, name);
  if (end - begin != want) {
    refuse(label, fmt::format("tensor '{}': shape {} of {} needs {} bytes, data_offsets give {}", name, shape.dump(),
                              info->name, want, end - begin));
  }
  t.bytes = data.subspan(begin, end - begin);
  span.begin = begin;
  span.end = end;
  return t;
}

// The buffer is covered exactly: sorted by offset, each tensor starts where the last ended.
void checkCoverage(std::vector<Span>& spans, const std::vector<StTensorView>& tensors, std::uint64_t data_bytes,
                   const std::string& label) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t at = 0;
  for (const auto& s : spans) {
    const std::string& name = tensors[s.index].name;
    if (s.begin < at)
      refuse(label, fmt::format("tensor '{}' overlaps the tensor before it (offset {} < {})", name, s.begin, at));
    if (s.begin > at)
      refuse(label, fmt::format("bytes [{}, {}) before tensor '{}' belong to no tensor", at, s.begin, name));
    at = s.end;
  }
  if (at != data_bytes) refuse(label, fmt::format("bytes [{}, {}) at the end belong to no tensor", at, data_bytes));
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, const std::string& label) {
  std::uint64_t header_len = 0;
  const json header = parseHeader(bytes, label, header_len);
  SafetensorsFile f;
  const std::span<const std::byte> data = bytes.subspan(8 + header_len);
  std::vector<Span> spans;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) refuse(label, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) refuse(label, fmt::format("__metadata__['{}'] is not a string", k));
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    Span span{0, 0, f.tensors_.size()};
    f.tensors_.push_back(readTensor(name, value, data, label, span));
    spans.push_back(span);
  }
  checkCoverage(spans, f.tensors_, data.size(), label);
  // Data order, the order a sequential reader touches the map in.
  std::vector<StTensorView> ordered;
  ordered.reserve(spans.size());
  for (const auto& s : spans) ordered.push_back(std::move(f.tensors_[s.index]));
  f.tensors_ = std::move(ordered);
  return f;
}

void SafetensorsFile::releasePages(const StTensorView& tensor) const {
  if (!map_ || tensor.bytes.empty()) return;
  const auto all = map_->bytes();
  const auto* first = tensor.bytes.data();
  const auto* last = first + tensor.bytes.size();
  if (first < all.data() || last > all.data() + all.size()) return;
  // Only the pages wholly inside the tensor: a neighbour's bytes may share the edge pages.
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(first) + page - 1) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(last) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

const StTensorView* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void writeSafetensors(const std::filesystem::path& path, const std::vector<StTensorView>& tensors,
                      const StMetadata& metadata) {
  const std::string label = path.string();
  std::vector<StTensorSource> sources;
  for (const auto& t : tensors) {
    if (!t.name.empty() && t.name != "__metadata__") {
      const std::uint64_t want = byteCount(t.shape, dtypeBytes(t.dtype), label, t.name);
      if (t.bytes.size() != want) {
        refuse(label,
               fmt::format("tensor '{}': {} bytes given, its shape and dtype need {}", t.name, t.bytes.size(), want));
      }
    }
    sources.push_back({t.name, t.dtype, t.shape, [bytes = t.bytes](std::span<std::byte> out) {
                         std::memcpy(out.data(), bytes.data(), bytes.size());
                       }});
  }
  writeSafetensors(path, sources, metadata);
}

void writeSafetensors(const std::filesystem::path& path, const std::vector<StTensorSource>& tensors,
                      const StMetadata& metadata) {
  const std::string label = path.string();
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      refuse(label, fmt::format("cannot write a tensor named '{}'", t.name));
    if (!names.insert(t.name).second) refuse(label, fmt::format("tensor '{}' is given twice", t.name));
    const std::uint64_t want = byteCount(t.shape, dtypeBytes(t.dtype), label, t.name);
    if (!t.fill) refuse(label, fmt::format("tensor '{}' has nothing to fill its bytes", t.name));
    header[t.name] = {{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + want}}};
    offset += want;
  }
  std::string text = header.dump();
  // Spaces pad the header so the data starts 8-byte aligned (what the reference writer does).
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const std::uint64_t len = text.size();

  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) refuse(label, fmt::format("cannot create {}", tmp.string()));
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    // One tensor's bytes at a time, in a buffer reused from tensor to tensor.
    std::vector<std::byte> buffer;
    for (const auto& t : tensors) {
      buffer.resize(byteCount(t.shape, dtypeBytes(t.dtype), label, t.name));
      t.fill(buffer);
      out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    }
    out.flush();
    if (!out) refuse(label, fmt::format("writing {} failed (disk full?)", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) refuse(label, fmt::format("cannot rename {} into place: {}", tmp.string(), ec.message()));
}

}  // namespace astraflow::io
