// TraceWriter, readTraceEvents and mergeTraceFiles (layout in trace_writer.hpp).
#include "astraflow/io/trace_writer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "astraflow/core/trace_kinds.hpp"
#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

constexpr const char* kTraceFormatName = "astraflow-trace";
constexpr const char* kEventsPath = "events";
constexpr std::size_t kMembers = 11;

// The in-memory record HDF5 converts to and from; the file type is a packed copy.
struct EventRecord {
  std::int32_t rank;
  char role[kTraceRoleBytes];
  char kind[kTraceKindBytes];
  double t_start;
  double t_end;
  std::int64_t version;
  std::uint64_t bytes;
  std::uint64_t count;
  std::int32_t policy;
  std::int32_t staleness;
  std::uint64_t total;
};

// Copies at most `width` bytes, backing off so that a UTF-8 character is never cut in half;
// the rest of the field is NUL padding.
void copyTruncated(char* field, std::size_t width, const std::string& value) {
  std::size_t length = std::min(width, value.size());
  if (length < value.size()) {
    while (length > 0 && (static_cast<unsigned char>(value[length]) & 0xC0U) == 0x80U) {
      --length;
    }
  }
  std::memset(field, 0, width);
  std::memcpy(field, value.data(), length);
}

std::string fromField(const char* field, std::size_t width) { return std::string(field, strnlen(field, width)); }

EventRecord toRecord(const TraceEvent& event) {
  EventRecord record{};
  record.rank = event.rank;
  copyTruncated(record.role, kTraceRoleBytes, event.role);
  copyTruncated(record.kind, kTraceKindBytes, event.kind);
  record.t_start = event.t_start;
  record.t_end = event.t_end;
  record.version = event.version;
  record.bytes = event.bytes;
  record.count = event.count;
  record.policy = event.policy;
  record.staleness = event.staleness;
  record.total = event.total;
  return record;
}

TraceEvent fromRecord(const EventRecord& record) {
  return TraceEvent{record.rank,
                    fromField(record.role, kTraceRoleBytes),
                    fromField(record.kind, kTraceKindBytes),
                    record.t_start,
                    record.t_end,
                    record.version,
                    record.bytes,
                    record.count,
                    record.policy,
                    record.total,
                    record.staleness};
}

// Member types come from `memberType` so the same builder makes the native memory type and
// the little-endian file type.
template <class MemberType>
H5Datatype eventType(std::size_t total, const std::size_t (&offsets)[kMembers], MemberType memberType) {
  auto type = H5Datatype::compound(total);
  type.insertMember("rank", offsets[0], memberType(ElementType::Int32));
  type.insertMember("role", offsets[1], H5Datatype::fixedString(kTraceRoleBytes));
  type.insertMember("kind", offsets[2], H5Datatype::fixedString(kTraceKindBytes));
  type.insertMember("t_start", offsets[3], memberType(ElementType::Float64));
  type.insertMember("t_end", offsets[4], memberType(ElementType::Float64));
  type.insertMember("version", offsets[5], memberType(ElementType::Int64));
  type.insertMember("bytes", offsets[6], memberType(ElementType::UInt64));
  type.insertMember("count", offsets[7], memberType(ElementType::UInt64));
  type.insertMember("policy", offsets[8], memberType(ElementType::Int32));
  type.insertMember("staleness", offsets[9], memberType(ElementType::Int32));
  type.insertMember("total", offsets[10], memberType(ElementType::UInt64));
  return type;
}

H5Datatype eventMemType() {
  const std::size_t offsets[kMembers] = {
      offsetof(EventRecord, rank),      offsetof(EventRecord, role),  offsetof(EventRecord, kind),
      offsetof(EventRecord, t_start),   offsetof(EventRecord, t_end), offsetof(EventRecord, version),
      offsetof(EventRecord, bytes),     offsetof(EventRecord, count), offsetof(EventRecord, policy),
      offsetof(EventRecord, staleness), offsetof(EventRecord, total)};
  return eventType(sizeof(EventRecord), offsets, [](ElementType t) { return H5Datatype::of(t); });
}

// Packed: no padding bytes on disk, the same on every platform.
H5Datatype eventFileType() {
  std::size_t offsets[kMembers];
  const std::size_t sizes[kMembers] = {4, kTraceRoleBytes, kTraceKindBytes, 8, 8, 8, 8, 8, 4, 4, 8};
  std::size_t at = 0;
  for (std::size_t i = 0; i < kMembers; ++i) {
    offsets[i] = at;
    at += sizes[i];
  }
  return eventType(at, offsets, [](ElementType t) { return H5Datatype::fileTypeOf(t); });
}

void appendEvents(const H5Dataset& dataset, const std::vector<TraceEvent>& events) {
  std::vector<EventRecord> records;
  records.reserve(events.size());
  for (const auto& event : events) records.push_back(toRecord(event));
  dataset.appendRaw(eventMemType(), records.data(), records.size());
}

}  // namespace

// ---- TraceWriter ---------------------------------------------------------------------------

TraceWriter::TraceWriter(const std::string& path, std::size_t flush_every)
    : file_(H5File::create(path)), flush_every_(std::max<std::size_t>(1, flush_every)) {
  file_.writeAttribute("format", kTraceFormatName);
  file_.writeAttribute("format_version", kTraceFormatVersion);
  // The kinds this build writes (core/trace_kinds.hpp), for readers outside C++ (plot_run.py).
  std::string kinds;
  for (const auto& k : kTraceKindNames) kinds += (kinds.empty() ? "" : ",") + std::string(k.name);
  file_.writeAttribute("kinds", kinds);
  events_ = file_.createExtendible(kEventsPath, eventFileType());
  buffer_.reserve(flush_every_);
  // The empty table is on disk before the first event: a crash still leaves a valid trace.
  file_.flush();
}

TraceWriter::~TraceWriter() { closeQuietly(); }

TraceWriter& TraceWriter::operator=(TraceWriter&& other) noexcept {
  if (this != &other) {
    closeQuietly();
    file_ = std::move(other.file_);
    events_ = std::move(other.events_);
    buffer_ = std::move(other.buffer_);
    flush_every_ = other.flush_every_;
    clock_ = other.clock_;
    written_ = other.written_;
    other.buffer_.clear();
  }
  return *this;
}

void TraceWriter::closeQuietly() noexcept {
  if (!file_.valid()) return;  // moved from
  try {
    flush();
  } catch (const std::exception& e) {
    try {
      spdlog::error("trace writer {}: {} buffered events lost: {}", file_.path(), buffer_.size(), e.what());
    } catch (...) {  // logging failed too: nothing left to do in a destructor
    }
  }
}

void TraceWriter::record(const TraceEvent& event) {
  buffer_.push_back(event);
  if (buffer_.size() >= flush_every_ || clock_.due()) flush();
}

void TraceWriter::recordAll(const std::vector<TraceEvent>& events) {
  flush();
  appendEvents(events_, events);
  written_ += events.size();
  file_.flush();
}

void TraceWriter::flush() {
  if (!buffer_.empty()) {
    appendEvents(events_, buffer_);
    written_ += buffer_.size();
    buffer_.clear();
  }
  file_.flush();
  clock_.flushed();
}

void TraceWriter::markCleanEnd() {
  flush();
  file_.writeAttribute("clean_end", std::int64_t{1});
  file_.flush();
}

// ---- reading and merging -------------------------------------------------------------------

std::vector<TraceEvent> readTraceEvents(const std::string& path) {
  const auto file = H5File::openReadOnly(path);
  const std::string format = file.hasAttribute("format") ? file.readStringAttribute("format") : std::string("(none)");
  if (format != kTraceFormatName) {
    ASTRA_H5_FAIL(
        fmt::format("'{}' is not an astraflow trace: attribute format is '{}', "
                    "expected '{}'",
                    path, format, kTraceFormatName));
  }
  const std::int64_t version = file.readInt64Attribute("format_version");
  if (version != kTraceFormatVersion) {
    ASTRA_H5_FAIL(
        fmt::format("trace '{}' has format_version {}, this build reads {}", path, version, kTraceFormatVersion));
  }
  const auto dataset = file.openDataset(kEventsPath);
  const auto stored = dataset.type();
  const auto dims = dataset.shape();
  if (!stored.isCompound() || dims.size() != 1) {
    ASTRA_H5_FAIL(
        fmt::format("trace '{}': /events holds {} with rank {}, expected a 1-D "
                    "compound table",
                    path, stored.describe(), dims.size()));
  }
  // HDF5 converts compound members by name, so a member missing from the file fails here.
  std::vector<EventRecord> records(dims[0]);
  dataset.readRaw(eventMemType(), records.data());
  std::vector<TraceEvent> events;
  events.reserve(records.size());
  for (const auto& record : records) events.push_back(fromRecord(record));
  return events;
}

void mergeTraceFiles(const std::vector<std::string>& inputs, const std::string& output, const std::string& run_id) {
  std::vector<TraceEvent> all;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (std::filesystem::equivalent(input, output, ec)) {
      throw Error(fmt::format("merging traces: output '{}' is also an input", output));
    }
    auto events = readTraceEvents(input);
    all.insert(all.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.t_start < b.t_start; });
  TraceWriter writer(output);
  if (!run_id.empty()) writer.tagRun(run_id);
  writer.recordAll(all);
}

}  // namespace astraflow::io
