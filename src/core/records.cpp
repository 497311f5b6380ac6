// Record encoders and decoders; the byte layout is documented in records.hpp.
#include "astraflow/core/records.hpp"

#include <fmt/format.h>

#include <limits>
#include <new>

#include "core/wire.hpp"

namespace astraflow {

namespace {

using wire::Reader;
using wire::sizeOf;
using wire::Writer;

// ---- sizes ------------------------------------------------------------------------------

std::size_t payloadSize(const Task& t) {
  std::size_t n = 8 + 8 + 8 + 4 + sizeOf(t.policy) + sizeOf(t.kind) + 4 + 4;
  for (const auto& [key, value] : t.metadata) n += sizeOf(key) + sizeOf(value);
  return n;
}

std::size_t payloadSize(const Trajectory& t) {
  return 8 + 8 + 8 + 4 + sizeOf(t.policy) + sizeOf(t.role) + 4 + 4 + 8 + 8 + sizeOf(t.tokens) +
         sizeOf(t.behav_logprobs) + sizeOf(t.policy_mask) + 4 + t.version_runs.size() * (8 + 4) + sizeOf(t.rewards) +
         8 + 8 + 8 + 4 + 1;
}

std::size_t payloadSize(const Batch& b) {
  std::size_t n = 8 + sizeOf(b.policy) + 8 + 8 + 4;
  for (const auto& t : b.trajectories) n += encodedSize(t);
  return n;
}

// The wire format's only hard limit: payload_bytes is a u32.
void checkRepresentable(std::size_t payload, const char* what) {
  if (payload > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: payload of {} bytes exceeds the wire format's limit of {} bytes per record", what,
                            payload, std::numeric_limits<std::uint32_t>::max()));
  }
}

// ---- writers ----------------------------------------------------------------------------

void write(Writer& w, const Task& t) {
  wire::writeHeader(w, wire::kTaskMagic, payloadSize(t), "task");
  w.put(t.task_id);
  w.put(t.problem_id);
  w.put(t.group_id);
  w.put(t.group_index);
  w.putString(t.policy);
  w.putString(t.kind);
  w.put(t.lease_ms);
  w.putCount(t.metadata.size());
  for (const auto& [key, value] : t.metadata) {
    w.putString(key);
    w.putString(value);
  }
}

void write(Writer& w, const Trajectory& t) {
  wire::writeHeader(w, wire::kTrajectoryMagic, payloadSize(t), "trajectory");
  w.put(t.task_id);
  w.put(t.problem_id);
  w.put(t.group_id);
  w.put(t.group_index);
  w.putString(t.policy);
  w.putString(t.role);
  w.put(t.producer_rank);
  w.put(t.pool_uid);
  w.put(t.weight_version_min);
  w.put(t.weight_version_max);
  w.putArray(t.tokens);
  w.putArray(t.behav_logprobs);
  w.putArray(t.policy_mask);
  w.putCount(t.version_runs.size());
  for (const auto& run : t.version_runs) {
    w.put(run.version);
    w.put(run.tokens);
  }
  w.putArray(t.rewards);
  w.put(t.t_queued);
  w.put(t.t_started);
  w.put(t.t_finished);
  w.put(t.turns);
  w.put(t.status);
}

void write(Writer& w, const Batch& b) {
  wire::writeHeader(w, wire::kBatchMagic, payloadSize(b), "batch");
  w.put(b.batch_id);
  w.putString(b.policy);
  w.put(b.trainer_version);
  w.put(b.max_staleness);
  w.putCount(b.trajectories.size());
  for (const auto& t : b.trajectories) write(w, t);
}

// Encodes into out, resized to the exact size (capacity reused when it suffices).
template <class R>
void encodeTo(const R& record, const char* what, std::vector<std::byte>& out) {
  const std::size_t total = encodedSize(record);
  checkRepresentable(total - kWireHeaderBytes, what);
  out.resize(total);
  Writer w(out);
  write(w, record);
  if (!w.full()) throw std::logic_error(fmt::format("wire: {} encoder wrote less than its computed size", what));
}

// ---- readers ----------------------------------------------------------------------------
// Each reads the payload fields in wire order and stops at the first error; structural checks
// (trailing bytes) come before the semantic ones so the message names the deeper problem.

bool read(Reader& r, Task& t) {
  if (!(r.get(t.task_id, "task_id") && r.get(t.problem_id, "problem_id") && r.get(t.group_id, "group_id") &&
        r.get(t.group_index, "group_index") && r.getString(t.policy, "policy") && r.getString(t.kind, "kind") &&
        r.get(t.lease_ms, "lease_ms"))) {
    return false;
  }
  std::uint32_t pairs = 0;
  if (!r.getCount(pairs, 8, "metadata")) return false;  // a pair is at least two empty strings
  for (std::uint32_t i = 0; i < pairs; ++i) {
    const std::size_t at = r.offset();
    std::string key, value;
    if (!(r.getString(key, "metadata key") && r.getString(value, "metadata value"))) return false;
    // Strictly increasing, as std::map writes them: one encoding per task, and no duplicate key
    // silently dropped.
    if (!t.metadata.empty() && !(t.metadata.rbegin()->first < key)) {
      return r.fail(
          fmt::format("task: metadata key '{}' at byte {} does not follow '{}' (keys must be unique and "
                      "in increasing order)",
                      key, at, t.metadata.rbegin()->first));
    }
    t.metadata.emplace_hint(t.metadata.end(), std::move(key), std::move(value));
  }
  return true;
}

bool readRuns(Reader& r, std::vector<VersionRun>& runs) {
  std::uint32_t count = 0;
  if (!r.getCount(count, 8 + 4, "version_runs")) return false;
  runs.resize(count);  // bounded by the check above
  for (auto& run : runs) {
    if (!(r.get(run.version, "version_runs.version") && r.get(run.tokens, "version_runs.tokens"))) return false;
  }
  return true;
}

bool read(Reader& r, Trajectory& t) {
  return r.get(t.task_id, "task_id") && r.get(t.problem_id, "problem_id") && r.get(t.group_id, "group_id") &&
         r.get(t.group_index, "group_index") && r.getString(t.policy, "policy") && r.getString(t.role, "role") &&
         r.get(t.producer_rank, "producer_rank") && r.get(t.pool_uid, "pool_uid") &&
         r.get(t.weight_version_min, "weight_version_min") && r.get(t.weight_version_max, "weight_version_max") &&
         r.getArray(t.tokens, "tokens") && r.getArray(t.behav_logprobs, "behav_logprobs") &&
         r.getArray(t.policy_mask, "policy_mask") && readRuns(r, t.version_runs) && r.getArray(t.rewards, "rewards") &&
         r.get(t.t_queued, "t_queued") && r.get(t.t_started, "t_started") && r.get(t.t_finished, "t_finished") &&
         r.get(t.turns, "turns") && r.get(t.status, "status");
}

bool read(Reader& r, Batch& b);  // below: it decodes nested trajectory records

// Semantic invariants, checked after the record parsed cleanly. Empty when all hold.
std::string invariantError(const Task&) { return {}; }
std::string invariantError(const Batch&) { return {}; }  // each nested trajectory was checked

// The runs cover the tokens exactly, in canonical form (one encoding per trajectory), and each
// policy token's version lies within the trajectory's range.
std::string versionRunsError(const Trajectory& t) {
  if (t.version_runs.empty()) return {};
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < t.version_runs.size(); ++i) {
    const VersionRun& run = t.version_runs[i];
    if (run.tokens == 0) return fmt::format("trajectory: version_runs[{}] covers no token", i);
    if (i > 0 && t.version_runs[i - 1].version == run.version) {
      return fmt::format("trajectory: version_runs[{}] repeats version {} of the run before it", i, run.version);
    }
    if (run.version != kContextVersion && (run.version < t.weight_version_min || run.version > t.weight_version_max)) {
      return fmt::format("trajectory: version_runs[{}] has version {}, outside weight_version_min..max {}..{}", i,
                         run.version, t.weight_version_min, t.weight_version_max);
    }
    covered += run.tokens;
  }
  if (covered != t.tokens.size()) {
    return fmt::format("trajectory: version_runs cover {} tokens of {}", covered, t.tokens.size());
  }
  return {};
}

std::string invariantError(const Trajectory& t) {
  if (t.tokens.size() != t.behav_logprobs.size() || t.tokens.size() != t.policy_mask.size()) {
    return fmt::format("trajectory: tokens/behav_logprobs/policy_mask lengths differ ({}/{}/{})", t.tokens.size(),
                       t.behav_logprobs.size(), t.policy_mask.size());
  }
  if (t.status > static_cast<std::uint8_t>(TrajectoryStatus::Returned)) {
    return fmt::format("trajectory: status {} is not one of 0 ok, 1 truncated, 2 nonfinite, 3 error, 4 returned",
                       t.status);
  }
  for (std::size_t i = 0; i < t.policy_mask.size(); ++i) {
    if (t.policy_mask[i] > 1) {
      return fmt::format("trajectory: policy_mask[{}] is {} (must be 0 or 1)", i, t.policy_mask[i]);
    }
  }
  return versionRunsError(t);
}

// Decodes bytes that must hold exactly one record of kind R. False with error set otherwise.
template <class R>
bool decodeExact(std::span<const std::byte> bytes, std::uint32_t magic, const char* what, R& out, std::string& error) {
  std::size_t record_bytes = 0;
  if (!wire::readHeader(bytes, magic, what, record_bytes, error)) return false;
  if (record_bytes != bytes.size()) {
    error =
        fmt::format("{}: {} trailing bytes after the {}-byte record", what, bytes.size() - record_bytes, record_bytes);
    return false;
  }
  Reader r(bytes.subspan(kWireHeaderBytes), what, kWireHeaderBytes);
  if (!read(r, out)) {
    error = r.error();
    return false;
  }
  if (r.remaining() != 0) {
    error = fmt::format("{}: {} trailing bytes in the payload after its last field (at byte {})", what, r.remaining(),
                        r.offset());
    return false;
  }
  error = invariantError(out);
  return error.empty();
}

bool read(Reader& r, Batch& b) {
  if (!(r.get(b.batch_id, "batch_id") && r.getString(b.policy, "policy") &&
        r.get(b.trainer_version, "trainer_version") && r.get(b.max_staleness, "max_staleness"))) {
    return false;
  }
  static const std::size_t kMinTrajectoryBytes = encodedSize(Trajectory{});
  std::uint32_t count = 0;
  if (!r.getCount(count, kMinTrajectoryBytes, "trajectories")) return false;
  b.trajectories.reserve(count);  // bounded by the check above: at most remaining / kMinTrajectoryBytes
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t at = r.offset();
    std::size_t record_bytes = 0;
    std::string error;
    std::span<const std::byte> record;
    if (!wire::readHeader(r.rest(), wire::kTrajectoryMagic, "trajectory", record_bytes, error) ||
        !r.getBytes(record, record_bytes, "trajectory") ||
        !decodeExact(record, wire::kTrajectoryMagic, "trajectory", b.trajectories.emplace_back(), error)) {
      return r.fail(fmt::format("batch: trajectory {} of {} at byte {}: {}", i, count, at, error));
    }
  }
  return true;
}

template <class R>
DecodeResult<R> decode(std::span<const std::byte> bytes, std::uint32_t magic, const char* what) {
  // Allocation is bounded by the record's size, but a large record can still meet a full heap;
  // the promise is an error, not an exception.
  try {
    R out;
    std::string error;
    if (decodeExact(bytes, magic, what, out, error)) return DecodeResult<R>::success(std::move(out));
    return DecodeResult<R>::failure(std::move(error));
  } catch (const std::bad_alloc&) {
    return DecodeResult<R>::failure(fmt::format("{}: out of memory decoding a {}-byte record", what, bytes.size()));
  } catch (const std::exception& e) {
    return DecodeResult<R>::failure(fmt::format("{}: internal error while decoding: {}", what, e.what()));
  }
}

}  // namespace

std::size_t encodedSize(const Task& task) { return kWireHeaderBytes + payloadSize(task); }
std::size_t encodedSize(const Trajectory& trajectory) { return kWireHeaderBytes + payloadSize(trajectory); }
std::size_t encodedSize(const Batch& batch) { return kWireHeaderBytes + payloadSize(batch); }

std::vector<std::byte> encode(const Task& task) {
  std::vector<std::byte> out;
  encodeTo(task, "task", out);
  return out;
}

std::vector<std::byte> encode(const Trajectory& trajectory) {
  std::vector<std::byte> out;
  encodeTo(trajectory, "trajectory", out);
  return out;
}

std::vector<std::byte> encode(const Batch& batch) {
  std::vector<std::byte> out;
  encodeTo(batch, "batch", out);
  return out;
}

void encodeInto(const Trajectory& trajectory, std::vector<std::byte>& out) { encodeTo(trajectory, "trajectory", out); }

DecodeResult<Task> decodeTask(std::span<const std::byte> record) {
  return decode<Task>(record, wire::kTaskMagic, "task");
}

DecodeResult<Trajectory> decodeTrajectory(std::span<const std::byte> record) {
  return decode<Trajectory>(record, wire::kTrajectoryMagic, "trajectory");
}

DecodeResult<Batch> decodeBatch(std::span<const std::byte> record) {
  return decode<Batch>(record, wire::kBatchMagic, "batch");
}

RecordKind peekKind(std::span<const std::byte> record) {
  if (record.size() < 4) return RecordKind::Unknown;
  std::uint32_t magic = 0;
  std::memcpy(&magic, record.data(), sizeof magic);
  if (magic == wire::kTaskMagic) return RecordKind::Task;
  if (magic == wire::kTrajectoryMagic) return RecordKind::Trajectory;
  if (magic == wire::kBatchMagic) return RecordKind::Batch;
  return RecordKind::Unknown;
}

void appendVersionRun(std::vector<VersionRun>& runs, std::int64_t version, std::uint32_t count) {
  if (count == 0) return;
  if (!runs.empty() && runs.back().version == version) {
    runs.back().tokens += count;
  } else {
    runs.push_back({version, count});
  }
}

std::vector<VersionRun> versionRunsOf(const std::vector<std::int64_t>& per_token) {
  std::vector<VersionRun> runs;
  for (const std::int64_t v : per_token) appendVersionRun(runs, v, 1);
  return runs;
}

std::vector<std::int64_t> tokenVersions(const Trajectory& t) {
  std::vector<std::int64_t> out;
  out.reserve(t.tokens.size());
  if (t.version_runs.empty()) {
    for (const auto m : t.policy_mask) out.push_back(m ? t.weight_version_max : kContextVersion);
    return out;
  }
  for (const auto& run : t.version_runs) out.insert(out.end(), run.tokens, run.version);
  return out;
}

void compactVersionRuns(Trajectory& t) {
  if (t.version_runs.empty()) return;
  std::size_t at = 0;
  for (const auto& run : t.version_runs) {
    for (std::uint32_t k = 0; k < run.tokens; ++k, ++at) {
      if (at >= t.policy_mask.size()) return;  // not covering the tokens: left for the decoder to refuse
      if (run.version != (t.policy_mask[at] ? t.weight_version_max : kContextVersion)) return;
    }
  }
  if (at == t.policy_mask.size()) t.version_runs.clear();
}

Task endOfStreamTask() {
  Task t;
  t.kind = kEndOfStreamKind;
  return t;
}

Trajectory endOfStreamTrajectory(const std::string& policy, std::int32_t producer_rank) {
  Trajectory t;
  t.task_id = kEndOfStreamId;
  t.policy = policy;
  t.producer_rank = producer_rank;
  return t;
}

Batch endOfStreamBatch(const std::string& policy) {
  Batch b;
  b.batch_id = kEndOfStreamId;
  b.policy = policy;
  return b;
}

}  // namespace astraflow
