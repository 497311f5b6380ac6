#pragma once
// The records that flow between components (docs/architecture.md, "Records") and their binary wire format.
// Pure data: no LibTorch, MPI or HDF5 here, so every rank kind and every offline tool can use it.
//
// Wire format, version 4 (version 2 added Trajectory.role, version 3 Batch.max_staleness, version 4
// Trajectory.version_runs; a build reads only its own version). A record is a 12-byte header followed by its payload:
//
//   offset size  field
//   0      4     magic          "ATSK" Task, "ATRJ" Trajectory, "ABAT" Batch (ASCII, in this order)
//   4      2     format_version 4
//   6      2     flags          0 (no flags are defined; any other value is refused)
//   8      4     payload_bytes  exactly the bytes that follow the header
//
// Scalars are little-endian, floats IEEE 754 (bit patterns kept, NaN payloads included).
// A string is u32 byte count + bytes; a vector is u32 element count + packed elements; a map is
// u32 pair count + (key string, value string) pairs in strictly increasing key order.
//
//   Task:       task_id u64, problem_id u64, group_id u64, group_index u32, policy str, kind str,
//               lease_ms u32, metadata map
//   Trajectory: task_id u64, problem_id u64, group_id u64, group_index u32, policy str, role str,
//               producer_rank i32, pool_uid u32, weight_version_min i64, weight_version_max i64,
//               tokens [i32], behav_logprobs [f32], policy_mask [u8], version_runs (u32 count + that
//               many (version i64, tokens u32) pairs), rewards [f64], t_queued f64, t_started f64,
//               t_finished f64, turns u32, status u8
//   Batch:      batch_id u64, policy str, trainer_version i64, max_staleness i64, u32 count + that many complete
//               Trajectory records (header included), so each one can be checked and sliced alone.
//
// Decoding takes the bytes of exactly one record, never reads outside them, never allocates more
// than they can justify (every count is checked against the bytes left before anything is
// resized), never throws, and reports the first problem as one line naming the record kind,
// the byte offset (from the record's first byte) and the field.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "astraflow/core/error.hpp"

namespace astraflow {

inline constexpr std::uint16_t kWireFormatVersion = 4;
inline constexpr std::size_t kWireHeaderBytes = 12;

struct Task {
  std::uint64_t task_id = 0;
  std::uint64_t problem_id = 0;
  std::uint64_t group_id = 0;
  std::uint32_t group_index = 0;  // sample index within its group
  std::string policy;             // route: the policy that should serve it
  std::string kind;               // environment name
  std::uint32_t lease_ms = 0;     // lease length for re-issue
  std::map<std::string, std::string> metadata;

  bool operator==(const Task&) const = default;
};

// Terminal status of a trajectory, as carried in Trajectory::status.
// Returned: the rank could not run the task (its inference server failed past the retries) and
// gives it back to the dataflow rank to be re-issued; no tokens. On an end-of-stream record it
// says the rank leaves early because its server is lost (docs/rollout-backends.md).
enum class TrajectoryStatus : std::uint8_t { Ok = 0, Truncated = 1, Nonfinite = 2, Error = 3, Returned = 4 };

// A stretch of consecutive tokens of one trajectory and the weight version that sampled them
// (kContextVersion: prompt and environment tokens, sampled by no policy). A sequence that moved
// to a new version mid-generation (rollout.on_new_version: continue) has one run per version.
struct VersionRun {
  std::int64_t version = 0;
  std::uint32_t tokens = 0;

  bool operator==(const VersionRun&) const = default;
};
inline constexpr std::int64_t kContextVersion = -1;

struct Trajectory {
  std::uint64_t task_id = 0;
  std::uint64_t problem_id = 0;
  std::uint64_t group_id = 0;
  std::uint32_t group_index = 0;
  std::string policy;  // the policy whose weights produced the tokens it trains on
  std::string role;    // workflow role ("solver", "verifier", …); empty for single-agent episodes
  std::int32_t producer_rank = -1;
  std::uint32_t pool_uid = 0;
  std::int64_t weight_version_min = 0;  // versions used (a multi-turn rollout may span several)
  std::int64_t weight_version_max = 0;
  std::vector<std::int32_t> tokens;
  std::vector<float> behav_logprobs;      // one per token
  std::vector<std::uint8_t> policy_mask;  // one per token: 1 = the policy's own token, 0 = not
  // Each token's version, as runs covering the tokens in order (adjacent runs differ in version,
  // none is empty; a policy token's version lies in [weight_version_min, weight_version_max]).
  // Empty: not recorded, every policy token at weight_version_max (tokenVersions below).
  std::vector<VersionRun> version_runs;
  std::vector<double> rewards;                         // one per role/objective; rewards[0] is the policy's
  double t_queued = 0, t_started = 0, t_finished = 0;  // seconds on the run clock
  std::uint32_t turns = 0;
  std::uint8_t status = 0;  // a TrajectoryStatus value

  // Member-wise with IEEE semantics: a NaN reward makes two otherwise equal records unequal.
  bool operator==(const Trajectory&) const = default;
};

struct Batch {
  std::uint64_t batch_id = 0;
  std::string policy;
  std::int64_t trainer_version = 0;  // the version the batch was built for
  // The staleness the dataflow rank served it under (η, or a replay sampler's own bound): the
  // trainer counts a trajectory older than this as a violation, without knowing the config.
  std::int64_t max_staleness = 0;
  std::vector<Trajectory> trajectories;

  bool operator==(const Batch&) const = default;
};

// End of a stream, in-band: the dataflow rank sends an end-of-stream task to each rollout rank
// and an end-of-stream batch to each trainer group; a rollout rank's last trajectory is one too.
// So no rank is ever stopped in the middle of a record.
inline constexpr const char* kEndOfStreamKind = "end-of-stream";
inline constexpr std::uint64_t kEndOfStreamId = ~std::uint64_t{0};

inline bool isEndOfStream(const Task& task) { return task.kind == kEndOfStreamKind; }
inline bool isEndOfStream(const Trajectory& t) { return t.task_id == kEndOfStreamId && t.tokens.empty(); }
inline bool isEndOfStream(const Batch& batch) { return batch.batch_id == kEndOfStreamId && batch.trajectories.empty(); }
Task endOfStreamTask();
Trajectory endOfStreamTrajectory(const std::string& policy, std::int32_t producer_rank);
Batch endOfStreamBatch(const std::string& policy);

// Appends `count` tokens of `version` to runs, merging with the last run when it is the same.
void appendVersionRun(std::vector<VersionRun>& runs, std::int64_t version, std::uint32_t count);
// The runs of per-token versions, and back: one version per token (context tokens
// kContextVersion; with no runs, each policy token at weight_version_max).
std::vector<VersionRun> versionRunsOf(const std::vector<std::int64_t>& per_token);
std::vector<std::int64_t> tokenVersions(const Trajectory& t);
// Clears the runs when they say no more than empty runs do (every policy token at
// weight_version_max, every context token kContextVersion): one form for one trajectory, and
// nothing on the wire for a sequence made under one version.
void compactVersionRuns(Trajectory& t);

// Task metadata keys the dataflow rank sets and RaaS ranks read.
inline constexpr const char* kTaskEvalKey = "eval";               // present: greedy evaluation task
inline constexpr const char* kTaskMinVersionKey = "min_version";  // generate with weights >= this

// Trajectories from a remote site carry pool_uid = kSitePoolUidBase + the site's index at home
// (local pools: their pool index), so trainers and trajectories.h5 can tell them apart.
inline constexpr std::uint32_t kSitePoolUidBase = 1u << 16;

// Either a decoded value or a one-line error. value() on an error throws Error with that line,
// for callers that prefer exceptions; the decoders themselves never throw.
template <class T>
class DecodeResult {
 public:
  static DecodeResult success(T value) { return DecodeResult(std::in_place_index<0>, std::move(value)); }
  static DecodeResult failure(std::string error) { return DecodeResult(std::in_place_index<1>, std::move(error)); }

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& {
    throwIfError();
    return std::get<0>(state_);
  }
  T& value() & {
    throwIfError();
    return std::get<0>(state_);
  }
  T&& value() && {
    throwIfError();
    return std::get<0>(std::move(state_));
  }
  // Empty when ok().
  const std::string& error() const { return ok() ? empty_ : std::get<1>(state_); }

 private:
  template <std::size_t I, class V>
  DecodeResult(std::in_place_index_t<I> tag, V&& v) : state_(tag, std::forward<V>(v)) {}
  void throwIfError() const {
    if (!ok()) throw Error(std::get<1>(state_));
  }

  std::variant<T, std::string> state_;
  inline static const std::string empty_;
};

// Exact encoded sizes, header included.
std::size_t encodedSize(const Task& task);
std::size_t encodedSize(const Trajectory& trajectory);
std::size_t encodedSize(const Batch& batch);

// Encoding throws Error only when a record cannot be represented (payload over 4 GiB).
// It does not check the semantic invariants; the decoder does, so a producer's bug is refused
// at the first reader rather than carried further.
std::vector<std::byte> encode(const Task& task);
std::vector<std::byte> encode(const Trajectory& trajectory);
std::vector<std::byte> encode(const Batch& batch);

// Replaces out's contents with the record. The hot path of rollout ranks: when out's capacity
// already suffices, nothing is allocated and out.data() does not move.
void encodeInto(const Trajectory& trajectory, std::vector<std::byte>& out);

// Each takes the bytes of exactly one record: fewer is "truncated", more is "trailing bytes".
DecodeResult<Task> decodeTask(std::span<const std::byte> record);
DecodeResult<Trajectory> decodeTrajectory(std::span<const std::byte> record);
DecodeResult<Batch> decodeBatch(std::span<const std::byte> record);

enum class RecordKind { Task, Trajectory, Batch, Unknown };

// The kind named by the magic; Unknown for fewer than 4 bytes or a magic this build does not
// know. Checks nothing else: decode to validate.
RecordKind peekKind(std::span<const std::byte> record);

}  // namespace astraflow
