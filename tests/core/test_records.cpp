// Records and their wire format: round trips, the exact byte layout, and decoding of damaged or
// hostile bytes (truncations, mutations, garbage, absurd counts), which must end in an error
// message and never in a crash, an out-of-bounds read or an allocation the record cannot justify.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>

#include "astraflow/core/error.hpp"
#include "astraflow/core/records.hpp"

using namespace astraflow;

// ---- allocation probe -------------------------------------------------------------------
// Replaces global operator new for this binary. While armed it counts allocations and records
// the largest request. Always, it refuses any single request over 256 MiB (nothing here needs
// one), so a decoder that resized before checking a count fails fast with bad_alloc instead of
// touching gigabytes during the fuzz loops.
namespace {
std::atomic<bool> g_probe_armed{false};
std::atomic<std::size_t> g_probe_count{0};
std::atomic<std::size_t> g_probe_largest{0};

struct AllocationProbe {
  AllocationProbe() {
    g_probe_count = 0;
    g_probe_largest = 0;
    g_probe_armed = true;
  }
  ~AllocationProbe() { g_probe_armed = false; }
  std::size_t count() const { return g_probe_count; }
  std::size_t largest() const { return g_probe_largest; }
};
}  // namespace

void* operator new(std::size_t n) {
  if (g_probe_armed.load(std::memory_order_relaxed)) {
    ++g_probe_count;
    std::size_t seen = g_probe_largest.load();
    while (n > seen && !g_probe_largest.compare_exchange_weak(seen, n)) {
    }
  }
  if (n > (std::size_t{256} << 20)) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC would otherwise see free() paired with a new-expression and warn.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

std::span<const std::byte> bytesOf(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

template <class T>
void poke(std::vector<std::byte>& buf, std::size_t at, T value) {
  ASSERT_LE(at + sizeof(T), buf.size());
  std::memcpy(buf.data() + at, &value, sizeof(T));
}

template <class T>
T peek(const std::vector<std::byte>& buf, std::size_t at) {
  T v{};
  std::memcpy(&v, buf.data() + at, sizeof(T));
  return v;
}

void setPayloadBytes(std::vector<std::byte>& buf) { poke(buf, 8, std::uint32_t(buf.size() - kWireHeaderBytes)); }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
#define EXPECT_MESSAGE(result, needle)                      \
  do {                                                      \
    const auto& r_ = (result);                              \
    ASSERT_FALSE(r_.ok()) << "decoded although " << needle; \
    EXPECT_PRED2(contains, r_.error(), needle);             \
  } while (0)

double nanWithPayload(std::uint64_t payload) {
  return std::bit_cast<double>(std::uint64_t{0x7ff8000000000000} | (payload & 0x0007ffffffffffff));
}

// Equal member by member, floating point compared by bit pattern (NaN payloads included).
void expectSameBits(const Trajectory& a, const Trajectory& b) {
  Trajectory a2 = a, b2 = b;
  a2.behav_logprobs.clear();
  b2.behav_logprobs.clear();
  a2.rewards.clear();
  b2.rewards.clear();
  a2.t_queued = a2.t_started = a2.t_finished = 0;
  b2.t_queued = b2.t_started = b2.t_finished = 0;
  EXPECT_EQ(a2, b2);
  ASSERT_EQ(a.behav_logprobs.size(), b.behav_logprobs.size());
  for (std::size_t i = 0; i < a.behav_logprobs.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a.behav_logprobs[i]), std::bit_cast<std::uint32_t>(b.behav_logprobs[i]))
        << "behav_logprobs[" << i << "]";
  }
  ASSERT_EQ(a.rewards.size(), b.rewards.size());
  for (std::size_t i = 0; i < a.rewards.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.rewards[i]), std::bit_cast<std::uint64_t>(b.rewards[i]))
        << "rewards[" << i << "]";
  }
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.t_queued), std::bit_cast<std::uint64_t>(b.t_queued));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.t_started), std::bit_cast<std::uint64_t>(b.t_started));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.t_finished), std::bit_cast<std::uint64_t>(b.t_finished));
}

Task sampleTask() {
  Task t;
  t.task_id = 0x0102030405060708ull;
  t.problem_id = 77;
  t.group_id = std::numeric_limits<std::uint64_t>::max();
  t.group_index = 5;
  t.policy = "solver";
  t.kind = "arith";  // odd length
  t.lease_ms = 30000;
  t.metadata = {{"bucket", "hard"}, {"", "empty key"}, {"empty value", ""}, {"curriculum.level", "17"}};
  return t;
}

Trajectory sampleTrajectory(std::size_t tokens, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Trajectory t;
  t.task_id = 1000 + seed;
  t.problem_id = 42;
  t.group_id = 9;
  t.group_index = 3;
  t.policy = "verifier-v2";  // odd length
  t.role = "verifier";
  t.producer_rank = 17;
  t.pool_uid = 0xdeadbeef;
  t.weight_version_min = -1;
  t.weight_version_max = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < tokens; ++i) {
    t.tokens.push_back(std::int32_t(rng()));
    t.behav_logprobs.push_back(-std::uniform_real_distribution<float>(0, 20)(rng));
    t.policy_mask.push_back(std::uint8_t(rng() & 1));
  }
  // Per-token versions: a context token, then version 5 and, past the middle, 6 (a sequence that
  // moved to new weights mid-generation). Three runs whatever the length.
  std::vector<std::int64_t> versions;
  for (std::size_t i = 0; i < tokens; ++i) versions.push_back(i == 0 ? kContextVersion : i < tokens / 2 ? 5 : 6);
  t.version_runs = versionRunsOf(versions);
  if (tokens > 2) {
    t.behav_logprobs[0] = -std::numeric_limits<float>::infinity();
    t.behav_logprobs[1] = std::numeric_limits<float>::denorm_min();
  }
  t.rewards = {1.0, -0.25, nanWithPayload(0x1234567)};
  t.t_queued = 1.5;
  t.t_started = 2.25;
  t.t_finished = 1e9 + 0.125;
  t.turns = 4;
  t.status = static_cast<std::uint8_t>(TrajectoryStatus::Truncated);
  return t;
}

Batch sampleBatch() {
  Batch b;
  b.batch_id = 12;
  b.policy = "sol";
  b.trainer_version = 3;
  b.max_staleness = 6;
  b.trajectories = {sampleTrajectory(5, 1), Trajectory{}, sampleTrajectory(31, 2)};
  b.trajectories[0].rewards = {0.5};  // keep == usable: no NaN here
  b.trajectories[2].rewards = {};
  return b;
}

// Offset of the tokens count in an encoded trajectory whose policy string has n bytes.
std::size_t tokensCountOffset(const Trajectory& t) {
  return 12 + 8 + 8 + 8 + 4 + 4 + t.policy.size() + 4 + t.role.size() + 4 + 4 + 8 + 8;
}

}  // namespace

// ---- round trips ------------------------------------------------------------------------

TEST(Records, TaskRoundTrip) {
  for (const Task& t : {sampleTask(), Task{}}) {
    const auto bytes = encode(t);
    EXPECT_EQ(bytes.size(), encodedSize(t));
    EXPECT_EQ(peekKind(bytesOf(bytes)), RecordKind::Task);
    const auto back = decodeTask(bytesOf(bytes));
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back.value(), t);
    EXPECT_TRUE(back.error().empty());
  }
}

TEST(Records, TrajectoryRoundTripKeepsEveryBit) {
  for (const Trajectory& t : {sampleTrajectory(37, 1), sampleTrajectory(200000, 2), Trajectory{}}) {
    const auto bytes = encode(t);
    EXPECT_EQ(bytes.size(), encodedSize(t));
    EXPECT_EQ(peekKind(bytesOf(bytes)), RecordKind::Trajectory);
    const auto back = decodeTrajectory(bytesOf(bytes));
    ASSERT_TRUE(back.ok()) << back.error();
    expectSameBits(back.value(), t);
  }
  // The NaN reward came back with its payload, not as some other NaN.
  const Trajectory t = sampleTrajectory(3, 3);
  const auto back = decodeTrajectory(bytesOf(encode(t)));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(std::isnan(back.value().rewards[2]));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(back.value().rewards[2]),
            std::bit_cast<std::uint64_t>(nanWithPayload(0x1234567)));
}

TEST(Records, VersionRunsExpandToOneVersionPerToken) {
  const std::vector<std::int64_t> per_token = {-1, -1, 3, 3, 3, 4, -1, 4, 4};
  const auto runs = versionRunsOf(per_token);
  const std::vector<VersionRun> expected = {{-1, 2}, {3, 3}, {4, 1}, {-1, 1}, {4, 2}};
  EXPECT_EQ(runs, expected);
  Trajectory t;
  t.tokens.assign(per_token.size(), 7);
  t.behav_logprobs.assign(per_token.size(), 0.0f);
  t.policy_mask = {0, 0, 1, 1, 1, 1, 0, 1, 1};
  t.weight_version_min = 3;
  t.weight_version_max = 4;
  t.version_runs = runs;
  EXPECT_EQ(tokenVersions(t), per_token);
  const auto back = decodeTrajectory(bytesOf(encode(t)));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(tokenVersions(back.value()), per_token);
  // Not recorded: every policy token at the newest version.
  t.version_runs.clear();
  EXPECT_EQ(tokenVersions(t), (std::vector<std::int64_t>{-1, -1, 4, 4, 4, 4, -1, 4, 4}));
}

// Every stream ends in-band; the end survives the wire and nothing else is taken for it.
TEST(Records, EndOfStreamRecordsSurviveTheWire) {
  const auto task = decodeTask(bytesOf(encode(endOfStreamTask())));
  ASSERT_TRUE(task) << task.error();
  EXPECT_TRUE(isEndOfStream(task.value()));
  const auto traj = decodeTrajectory(bytesOf(encode(endOfStreamTrajectory("sol", 7))));
  ASSERT_TRUE(traj) << traj.error();
  EXPECT_TRUE(isEndOfStream(traj.value()));
  EXPECT_EQ(traj.value().producer_rank, 7);
  EXPECT_EQ(traj.value().policy, "sol");
  const auto batch = decodeBatch(bytesOf(encode(endOfStreamBatch("sol"))));
  ASSERT_TRUE(batch) << batch.error();
  EXPECT_TRUE(isEndOfStream(batch.value()));

  EXPECT_FALSE(isEndOfStream(sampleTrajectory(5, 1)));
  EXPECT_FALSE(isEndOfStream(sampleBatch()));
  Task ordinary;
  ordinary.kind = "arithmetic";
  EXPECT_FALSE(isEndOfStream(ordinary));
  Batch with_data = endOfStreamBatch("sol");  // the end-of-stream id on a batch that carries data
  with_data.trajectories.push_back(sampleTrajectory(5, 1));
  EXPECT_FALSE(isEndOfStream(with_data));
}

TEST(Records, BatchRoundTrip) {
  const Batch b = sampleBatch();
  const auto bytes = encode(b);
  EXPECT_EQ(bytes.size(), encodedSize(b));
  EXPECT_EQ(peekKind(bytesOf(bytes)), RecordKind::Batch);
  const auto back = decodeBatch(bytesOf(bytes));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back.value(), b);

  Batch empty;
  empty.policy = "p";
  const auto empty_back = decodeBatch(bytesOf(encode(empty)));
  ASSERT_TRUE(empty_back.ok()) << empty_back.error();
  EXPECT_EQ(empty_back.value(), empty);
}

// The layout is a contract with other builds and offline tools: pin it byte for byte.
TEST(Records, TaskBytesMatchTheDocumentedLayout) {
  Task t;
  t.task_id = 0x0102030405060708ull;
  t.problem_id = 2;
  t.group_id = 3;
  t.group_index = 4;
  t.policy = "p";
  t.kind = "kd";
  t.lease_ms = 0x01020304;
  t.metadata = {{"k", "v"}};
  const auto b = encode(t);
  const std::vector<std::uint8_t> expected = {'A', 'T', 'S', 'K', 4,   0,   0, 0, 57, 0,
                                              0,   0,  // magic, format_version, flags, payload_bytes
                                              8,   7,   6,   5,   4,   3,   2, 1,            // task_id
                                              2,   0,   0,   0,   0,   0,   0, 0,            // problem_id
                                              3,   0,   0,   0,   0,   0,   0, 0,            // group_id
                                              4,   0,   0,   0,                              // group_index
                                              1,   0,   0,   0,   'p',                       // policy
                                              2,   0,   0,   0,   'k', 'd',                  // kind
                                              4,   3,   2,   1,                              // lease_ms
                                              1,   0,   0,   0,                              // metadata count
                                              1,   0,   0,   0,   'k', 1,   0, 0, 0,  'v'};  // key, value
  ASSERT_EQ(b.size(), expected.size());
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(std::uint8_t(b[i]), expected[i]) << "byte " << i;
}

TEST(Records, TrajectoryAndBatchMagicsAndNesting) {
  const Batch batch = sampleBatch();
  const auto b = encode(batch);
  EXPECT_EQ(std::memcmp(b.data(), "ABAT", 4), 0);
  // The first nested trajectory is a complete record right after the batch's fixed fields.
  // Header, batch_id, policy, trainer_version, max_staleness, count.
  const std::size_t first = 12 + 8 + 4 + batch.policy.size() + 8 + 8 + 4;
  EXPECT_EQ(peek<std::uint32_t>(b, first - 4), 3u);
  const auto nested = encode(batch.trajectories[0]);
  ASSERT_LE(first + nested.size(), b.size());
  EXPECT_EQ(std::memcmp(b.data() + first, nested.data(), nested.size()), 0);
  EXPECT_EQ(std::memcmp(nested.data(), "ATRJ", 4), 0);
}

TEST(Records, PeekKind) {
  EXPECT_EQ(peekKind(bytesOf(encode(Task{}))), RecordKind::Task);
  EXPECT_EQ(peekKind(bytesOf(encode(Trajectory{}))), RecordKind::Trajectory);
  EXPECT_EQ(peekKind(bytesOf(encode(Batch{}))), RecordKind::Batch);
  const auto t = encode(Trajectory{});
  EXPECT_EQ(peekKind(std::span(t).first(3)), RecordKind::Unknown);
  EXPECT_EQ(peekKind({}), RecordKind::Unknown);
  auto bad = t;
  bad[3] = std::byte{'X'};
  EXPECT_EQ(peekKind(bytesOf(bad)), RecordKind::Unknown);
}

TEST(Records, ValueOfAFailedResultThrowsWithItsMessage) {
  const auto r = decodeTrajectory({});
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  try {
    (void)r.value();
    FAIL() << "value() did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), r.error());
  }
}

// ---- encodeInto -------------------------------------------------------------------------

TEST(Records, EncodeIntoReusesCapacity) {
  const Trajectory big = sampleTrajectory(4096, 5);
  std::vector<std::byte> out;
  encodeInto(big, out);
  EXPECT_EQ(out, encode(big));
  const std::size_t capacity = out.capacity();
  const std::byte* data = out.data();

  const Trajectory same = sampleTrajectory(4096, 6);
  const Trajectory smaller = sampleTrajectory(100, 7);
  for (const Trajectory* t : {&same, &smaller, &big}) {
    {
      AllocationProbe probe;
      encodeInto(*t, out);
      EXPECT_EQ(probe.count(), 0u) << "encodeInto allocated although the capacity sufficed";
    }
    EXPECT_EQ(out.capacity(), capacity);
    EXPECT_EQ(out.data(), data);
    EXPECT_EQ(out.size(), encodedSize(*t));
    EXPECT_EQ(out, encode(*t));  // no stale bytes from the previous, larger record
  }
}

// ---- damaged and hostile bytes ----------------------------------------------------------

TEST(Records, EveryTruncationIsAnError) {
  const auto full = encode(sampleTrajectory(37, 9));
  for (std::size_t n = 0; n < full.size(); ++n) {
    // As cut, with the header still claiming the full payload.
    const auto r = decodeTrajectory(std::span(full).first(n));
    ASSERT_FALSE(r.ok()) << "accepted a record cut to " << n << " bytes";
    EXPECT_FALSE(r.error().empty());
    // With payload_bytes rewritten to match, so the field reader itself meets the end.
    if (n >= kWireHeaderBytes) {
      std::vector<std::byte> cut(full.begin(), full.begin() + std::ptrdiff_t(n));
      setPayloadBytes(cut);
      const auto r2 = decodeTrajectory(bytesOf(cut));
      ASSERT_FALSE(r2.ok()) << "accepted a consistent record cut to " << n << " bytes";
      EXPECT_TRUE(contains(r2.error(), "truncated") || contains(r2.error(), "exceeds the message") ||
                  contains(r2.error(), "lengths differ"))
          << r2.error();
    }
  }
  const auto batch = encode(sampleBatch());
  for (std::size_t n = 0; n < batch.size(); ++n) {
    ASSERT_FALSE(decodeBatch(std::span(batch).first(n)).ok()) << n;
    if (n >= kWireHeaderBytes) {
      std::vector<std::byte> cut(batch.begin(), batch.begin() + std::ptrdiff_t(n));
      setPayloadBytes(cut);
      ASSERT_FALSE(decodeBatch(bytesOf(cut)).ok()) << n;
    }
  }
  const auto task = encode(sampleTask());
  for (std::size_t n = 0; n < task.size(); ++n) ASSERT_FALSE(decodeTask(std::span(task).first(n)).ok()) << n;
}

TEST(Records, TruncationMessageNamesFieldOffsetAndSizes) {
  Trajectory t = sampleTrajectory(10, 4);
  auto b = encode(t);
  const std::size_t at = tokensCountOffset(t);
  ASSERT_EQ(peek<std::uint32_t>(b, at), 10u);
  poke(b, at, std::uint32_t{1000});
  const auto r = decodeTrajectory(bytesOf(b));
  const std::size_t have = b.size() - at - 4;
  EXPECT_MESSAGE(r, "trajectory: truncated at byte " + std::to_string(at + 4) + " reading tokens (need 4000, have " +
                        std::to_string(have) + ")");
}

TEST(Records, HugeCountsAreRefusedWithoutAllocating) {
  const Trajectory t = sampleTrajectory(10, 4);
  auto b = encode(t);
  poke(b, tokensCountOffset(t), std::uint32_t{1} << 31);
  {
    AllocationProbe probe;
    const auto r = decodeTrajectory(bytesOf(b));
    EXPECT_LT(probe.largest(), b.size() + 1024) << "decoder allocated before checking the count";
    EXPECT_MESSAGE(r, "reading tokens (need 8589934592");
  }
  // 2^31 version runs: refused before the runs are sized.
  auto v = encode(t);
  const std::size_t runs_at = tokensCountOffset(t) + 4 + 10 * 4 + 4 + 10 * 4 + 4 + 10;
  ASSERT_EQ(peek<std::uint32_t>(v, runs_at), t.version_runs.size());
  poke(v, runs_at, std::uint32_t{1} << 31);
  {
    AllocationProbe probe;
    const auto r = decodeTrajectory(bytesOf(v));
    EXPECT_LT(probe.largest(), v.size() + 1024);
    EXPECT_MESSAGE(r, "reading version_runs");
  }
  // A string length beyond the record.
  auto s = encode(t);
  poke(s, 12 + 8 + 8 + 8 + 4, std::uint32_t{4000000000u});
  {
    AllocationProbe probe;
    const auto r = decodeTrajectory(bytesOf(s));
    EXPECT_LT(probe.largest(), s.size() + 1024);
    EXPECT_MESSAGE(r, "policy: string of 4000000000 bytes exceeds the message");
  }
  // A task claiming 2^31 metadata pairs.
  Task task = sampleTask();
  task.metadata.clear();
  auto m = encode(task);
  poke(m, m.size() - 4, std::uint32_t{1} << 31);
  {
    AllocationProbe probe;
    const auto r = decodeTask(bytesOf(m));
    EXPECT_LT(probe.largest(), m.size() + 1024);
    EXPECT_MESSAGE(r, "reading metadata");
  }
  // A batch claiming 2^31 trajectories: refused before reserving room for them.
  Batch batch;
  batch.policy = "p";
  auto bb = encode(batch);
  poke(bb, bb.size() - 4, std::uint32_t{1} << 31);
  {
    AllocationProbe probe;
    const auto r = decodeBatch(bytesOf(bb));
    EXPECT_LT(probe.largest(), bb.size() + 1024);
    EXPECT_MESSAGE(r, "reading trajectories");
  }
}

TEST(Records, HeaderErrorsNameTheProblem) {
  const auto good = encode(sampleTrajectory(8, 1));
  ASSERT_TRUE(decodeTrajectory(bytesOf(good)).ok());

  EXPECT_MESSAGE(decodeTask(bytesOf(good)), "bad magic 'ATRJ': this is a trajectory record, expected 'ATSK'");
  auto b = good;
  b[0] = std::byte{0xff};
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)), "bad magic 0x");

  b = good;
  poke(b, 4, std::uint16_t{7});
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)), "unsupported format_version 7 (this build reads 4)");

  b = good;
  poke(b, 6, std::uint16_t{4});
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)), "unsupported flags 0x0004");

  b = good;
  poke(b, 8, std::uint32_t{9000});
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)),
                 "payload_bytes 9000 but the record has " + std::to_string(good.size() - 12));

  b = good;
  b.resize(b.size() + 3);
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)), "3 trailing bytes after the " + std::to_string(good.size()));

  b = good;
  b.resize(b.size() + 2);
  setPayloadBytes(b);
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(b)), "2 trailing bytes in the payload");

  EXPECT_MESSAGE(decodeTrajectory(std::span(good).first(7)), "truncated header: 7 bytes");
}

TEST(Records, SemanticInvariantsAreChecked) {
  Trajectory t = sampleTrajectory(10, 1);
  t.policy_mask.pop_back();
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "tokens/behav_logprobs/policy_mask lengths differ (10/10/9)");

  t = sampleTrajectory(10, 1);
  t.behav_logprobs.push_back(0);
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "lengths differ (10/11/10)");

  t = sampleTrajectory(10, 1);
  t.status = 5;
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "status 5 is not one of");
  t.status = 4;  // Returned: a task given back (docs/rollout-backends.md)
  EXPECT_TRUE(decodeTrajectory(bytesOf(encode(t))).ok());
  t.status = 3;
  EXPECT_TRUE(decodeTrajectory(bytesOf(encode(t))).ok());

  t = sampleTrajectory(10, 1);
  t.policy_mask[6] = 2;
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "policy_mask[6] is 2 (must be 0 or 1)");

  // Per-token versions: covering every token exactly, canonical, within the version range.
  t = sampleTrajectory(10, 1);
  ASSERT_GE(t.version_runs.size(), 2u);
  t.version_runs.back().tokens += 1;
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "version_runs cover 11 tokens of 10");
  t = sampleTrajectory(10, 1);
  t.version_runs.push_back({t.version_runs.back().version, 0});
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "covers no token");
  t = sampleTrajectory(10, 1);
  t.version_runs.back().tokens -= 1;
  t.version_runs.push_back({t.version_runs.back().version, 1});
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "repeats version");
  t = sampleTrajectory(10, 1);
  t.weight_version_min = 6;
  EXPECT_MESSAGE(decodeTrajectory(bytesOf(encode(t))), "has version 5, outside weight_version_min..max 6..");

  // Inside a batch the message says which trajectory.
  Batch batch = sampleBatch();
  batch.trajectories[1].status = 9;
  const auto bytes = encode(batch);
  const std::size_t second = 12 + 8 + 4 + batch.policy.size() + 8 + 8 + 4 + encodedSize(batch.trajectories[0]);
  EXPECT_MESSAGE(decodeBatch(bytesOf(bytes)),
                 "batch: trajectory 1 of 3 at byte " + std::to_string(second) + ": trajectory: status 9");
  // A nested record of the wrong kind.
  batch = sampleBatch();
  auto wrong = encode(batch);
  std::memcpy(wrong.data() + second, "ATSK", 4);
  EXPECT_MESSAGE(decodeBatch(bytesOf(wrong)), "this is a task record");
}

TEST(Records, MetadataKeysMustBeUniqueAndOrdered) {
  Task t;
  t.metadata = {{"a", "1"}, {"b", "2"}};
  auto b = encode(t);
  ASSERT_TRUE(decodeTask(bytesOf(b)).ok());
  // The second key is the 6th byte from the end: [len 1]['b'][len 1]['2'].
  const std::size_t second_key = b.size() - 6;
  ASSERT_EQ(b[second_key], std::byte{'b'});
  b[second_key] = std::byte{'a'};
  EXPECT_MESSAGE(decodeTask(bytesOf(b)), "metadata key 'a'");
  b[second_key] = std::byte{'0'};
  EXPECT_MESSAGE(decodeTask(bytesOf(b)), "must be unique and in increasing order");
}

// Any record the decoder accepts re-encodes to the same bytes (the format has one encoding per
// record), so an accepted mutation is a real record, not a misread.
template <class Decode>
void mutateAndDecode(const std::vector<std::byte>& good, Decode decode, int rounds, std::uint32_t seed) {
  std::mt19937 rng(seed);
  int accepted = 0;
  for (int i = 0; i < rounds; ++i) {
    auto b = good;
    const std::size_t at = rng() % b.size();
    b[at] = std::byte(std::uint8_t(std::uint8_t(b[at]) + 1 + rng() % 255));  // always a different value
    const auto r = decode(bytesOf(b));
    if (r.ok()) {
      ++accepted;
      ASSERT_EQ(encode(r.value()), b) << "accepted mutation at byte " << at << " does not re-encode";
    } else {
      ASSERT_FALSE(r.error().empty());
      if (at < 4) {
        ASSERT_PRED2(contains, r.error(), "bad magic");
      }
    }
  }
  // Mutations that change a fixed-size value (ids, tokens, timestamps) are legitimate records.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, rounds);
}

TEST(Records, RandomMutationsNeverCrash) {
  mutateAndDecode(encode(sampleTrajectory(37, 11)), decodeTrajectory, 20000, 1);
  mutateAndDecode(encode(sampleBatch()), decodeBatch, 20000, 2);
  mutateAndDecode(encode(sampleTask()), decodeTask, 20000, 3);
}

TEST(Records, RandomGarbageNeverCrashes) {
  std::mt19937 rng(12345);
  const auto header_of = [](const char* magic) {
    std::vector<std::byte> h(12);
    std::memcpy(h.data(), magic, 4);
    h[4] = std::byte{1};
    return h;
  };
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> b(rng() % 600);
    for (auto& x : b) x = std::byte(rng() & 0xff);
    // Half the buffers carry a valid header so the payload readers see the garbage too.
    if (i % 2 == 0 && b.size() >= 12) {
      static const char* kMagics[] = {"ATSK", "ATRJ", "ABAT"};
      const auto h = header_of(kMagics[i / 2 % 3]);
      std::copy(h.begin(), h.end(), b.begin());
      setPayloadBytes(b);
    }
    const auto task = decodeTask(bytesOf(b));
    const auto traj = decodeTrajectory(bytesOf(b));
    const auto batch = decodeBatch(bytesOf(b));
    if (task.ok()) {
      ASSERT_EQ(encode(task.value()), b);
    }
    if (traj.ok()) {
      ASSERT_EQ(encode(traj.value()), b);
    }
    if (batch.ok()) {
      ASSERT_EQ(encode(batch.value()), b);
    }
    accepted += task.ok() + traj.ok() + batch.ok();
    ASSERT_TRUE(task.ok() || !task.error().empty());
  }
  EXPECT_LT(accepted, 100);
}
