// computeTraceReport on synthetic events (every figure checked exactly: the times are binary
// fractions, so sums and means carry no rounding), the file-level entry point on a real
// trace.h5, its one-line errors, and summary.json reading.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/io/trace_report.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "io/temp_dir.hpp"

namespace astraflow::io {
namespace {

using test::TempDir;

TraceEvent event(std::int32_t rank, const char* role, const char* kind, double t_start, double t_end,
                 std::int64_t version = 0, std::uint64_t bytes = 0, std::uint64_t count = 0) {
  return TraceEvent{rank, role, kind, t_start, t_end, version, bytes, count};
}

// A batch_staleness event: `count` trajectories `staleness` versions behind trainer version 9.
TraceEvent staleEvent(double t, std::int32_t staleness, std::uint64_t count) {
  TraceEvent e = event(0, "dataflow", "batch_staleness", t, t, 9, 0, count);
  e.staleness = staleness;
  return e;
}

// A books_used event: `consumed` of the `left` trajectories that left the buffer (the rest stale).
TraceEvent booksUsed(double t, std::uint64_t consumed, std::uint64_t left) {
  TraceEvent e = event(0, "dataflow", "books_used", t, t, 1, 0, consumed);
  e.total = left;
  return e;
}

// Two trainers, one rollout rank, one dataflow rank, and kinds the report does not know.
std::vector<TraceEvent> syntheticRun() {
  return {
      event(0, "dataflow", "startup", 0, 0.25),
      // trainer 1: waits 1 s, steps 3 s.
      event(1, "trainer", "batch_wait", 0, 1, 0),
      event(1, "trainer", "train_step", 1, 4, 1, 1000, 8),
      event(1, "trainer", "weight_stage", 4, 4.5, 1, 4096),
      // trainer 2: recorded out of time order; waits 0.5 + 0.5 s, steps 2 + 1 s.
      event(2, "trainer", "train_step", 3, 4, 2, 300, 4),
      event(2, "trainer", "batch_wait", 0, 0.5, 0),
      event(2, "trainer", "train_step", 0.5, 2.5, 1, 500, 4),
      event(2, "trainer", "batch_wait", 2.5, 3, 1),
      event(2, "trainer", "checkpoint", 4, 4.25, 2, 9999),
      event(2, "trainer", "eval", 4.25, 6),
      // rollout 3: a startup before the active span 2..10; 4 s generating, 2 pulls of 0.5 s.
      event(3, "rollout", "startup", 0, 2),
      event(3, "rollout", "weight_pull", 2, 2.5, 0, 1024),
      event(3, "rollout", "generate", 2.5, 4.5, 0, 400, 4),
      event(3, "rollout", "task_wait", 4.5, 5.5),
      event(3, "rollout", "generate", 5.5, 7.5, 0, 400, 4),
      event(3, "rollout", "weight_pull", 9.5, 10, 1, 1024),
      // dataflow: publishes, two served batches with their staleness, drops.
      event(0, "dataflow", "publish", 4.5, 4.75, 2, 4096),
      event(0, "dataflow", "publish", 4.5, 4.5, 1, 4096),
      event(0, "dataflow", "serve_batch", 1, 1, 0, 100, 8),
      staleEvent(1, 0, 6),
      staleEvent(1, 1, 2),
      event(0, "dataflow", "serve_batch", 3, 3, 1, 60, 4),
      staleEvent(3, 0, 1),
      staleEvent(3, 3, 1),
      staleEvent(3, 5, 0),  // an empty bin adds nothing
      // cumulative books: the latest (by time, not file order) says 5 left the buffer stale.
      booksUsed(3, 10, 12),
      booksUsed(5, 20, 25),
      booksUsed(4, 15, 18),
      event(0, "dataflow", "checkpoint", 5, 5.5, 2, 777),
      event(0, "dataflow", "handshake", 11, 12),
  };
}

TEST(TraceReport, TrainerFigures) {
  const auto report = computeTraceReport(syntheticRun());
  ASSERT_EQ(report.trainers.size(), 2u);

  const auto& t1 = report.trainers[0];
  EXPECT_EQ(t1.rank, 1);
  EXPECT_EQ(t1.steps, 1u);
  EXPECT_EQ(t1.mean_step_s, 3.0);
  EXPECT_EQ(t1.max_step_s, 3.0);
  EXPECT_EQ(t1.batch_waits, 1u);
  EXPECT_EQ(t1.mean_wait_s, 1.0);
  EXPECT_EQ(t1.wait_fraction, 0.25);
  EXPECT_EQ(t1.first_version, 1);
  EXPECT_EQ(t1.last_version, 1);
  EXPECT_EQ(t1.trajectories, 8u);
  EXPECT_EQ(t1.tokens, 1000u);
  EXPECT_EQ(t1.weight_stages, 1u);
  EXPECT_EQ(t1.checkpoints, 0u);

  const auto& t2 = report.trainers[1];
  EXPECT_EQ(t2.rank, 2);
  EXPECT_EQ(t2.steps, 2u);
  EXPECT_EQ(t2.total_step_s, 3.0);
  EXPECT_EQ(t2.mean_step_s, 1.5);
  EXPECT_EQ(t2.max_step_s, 2.0);
  EXPECT_EQ(t2.batch_waits, 2u);
  EXPECT_EQ(t2.total_wait_s, 1.0);
  EXPECT_EQ(t2.mean_wait_s, 0.5);
  EXPECT_EQ(t2.wait_fraction, 0.25);
  EXPECT_EQ(t2.first_version, 1);  // by time, not by file order
  EXPECT_EQ(t2.last_version, 2);
  EXPECT_EQ(t2.trajectories, 8u);
  EXPECT_EQ(t2.tokens, 800u);
  EXPECT_EQ(t2.checkpoints, 1u);
}

TEST(TraceReport, RolloutThroughputOverSpanAndBusyTime) {
  const auto report = computeTraceReport(syntheticRun());
  ASSERT_EQ(report.rollouts.size(), 1u);
  const auto& r = report.rollouts[0];
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.batches, 2u);
  EXPECT_EQ(r.trajectories, 8u);
  EXPECT_EQ(r.tokens, 800u);
  EXPECT_EQ(r.busy_s, 4.0);
  EXPECT_EQ(r.span_s, 8.0);  // 2..10: the startup event does not count
  EXPECT_EQ(r.trajectories_per_span_s, 1.0);
  EXPECT_EQ(r.tokens_per_span_s, 100.0);
  EXPECT_EQ(r.trajectories_per_busy_s, 2.0);
  EXPECT_EQ(r.tokens_per_busy_s, 200.0);
  EXPECT_EQ(r.weight_pulls, 2u);
  EXPECT_EQ(r.pull_bytes, 2048u);
  EXPECT_EQ(r.mean_pull_s, 0.5);
  EXPECT_EQ(r.task_wait_s, 1.0);
}

TEST(TraceReport, StalenessHistogramAndDataflow) {
  const auto report = computeTraceReport(syntheticRun());
  const auto& h = report.staleness;
  EXPECT_EQ(h.trajectories_by_staleness, (std::map<std::int64_t, std::uint64_t>{{0, 7}, {1, 2}, {3, 1}}));
  EXPECT_EQ(h.trajectories, 10u);
  EXPECT_EQ(h.mean, 0.5);  // (0*7 + 1*2 + 3*1) / 10
  EXPECT_EQ(h.max, 3);

  const auto& d = report.dataflow;
  EXPECT_EQ(d.versions_published, 2u);
  EXPECT_EQ(d.publish_bytes, 8192u);
  EXPECT_EQ(d.last_published_version, 2);
  EXPECT_EQ(d.batches_served, 2u);
  EXPECT_EQ(d.trajectories_served, 12u);
  EXPECT_EQ(d.bytes_served, 160u);
  EXPECT_EQ(d.stale_dropped, 5u);
  EXPECT_EQ(d.checkpoints, 1u);

  EXPECT_EQ(report.events, syntheticRun().size());
  EXPECT_EQ(report.t_first, 0.0);
  EXPECT_EQ(report.t_last, 12.0);  // unknown kinds still bound the wall span
  EXPECT_EQ(report.wall_s, 12.0);
}

TEST(TraceReport, EdgeCasesGiveZerosNotNaNs) {
  EXPECT_EQ(computeTraceReport({}), TraceReport{});

  // Only unknown kinds: ranks appear with zero figures; nothing is divided by zero.
  const auto report = computeTraceReport({event(4, "rollout", "startup", 1, 2), event(5, "trainer", "eval", 2, 3),
                                          event(6, "learner", "train_step", 0, 5)});
  EXPECT_EQ(report.events, 3u);
  EXPECT_EQ(report.wall_s, 5.0);
  ASSERT_EQ(report.rollouts.size(), 1u);
  EXPECT_EQ(report.rollouts[0], RolloutTraceStats{.rank = 4});
  ASSERT_EQ(report.trainers.size(), 1u);
  EXPECT_EQ(report.trainers[0], TrainerTraceStats{.rank = 5});
  EXPECT_FALSE(report.staleness.max.has_value());
  EXPECT_EQ(report.staleness.mean, 0.0);

  // A reversed interval counts as no time rather than negative time.
  const auto reversed = computeTraceReport({event(1, "trainer", "train_step", 5, 4, 1)});
  EXPECT_EQ(reversed.trainers[0].total_step_s, 0.0);
  EXPECT_EQ(reversed.wall_s, 1.0);
}

TEST(TraceReport, FileEntryPointReadsTheSameReport) {
  TempDir dir;
  const auto events = syntheticRun();
  {
    TraceWriter writer(dir.file("trace.h5"), 7);  // several appends
    for (const auto& e : events) writer.record(e);
  }
  EXPECT_EQ(traceFileOf(dir.path().string()), dir.file("trace.h5"));
  EXPECT_EQ(traceFileOf(dir.file("trace.h5")), dir.file("trace.h5"));
  EXPECT_EQ(loadTraceReport(traceFileOf(dir.path().string())), computeTraceReport(events));
}

// The message of the Error `path` raises: one line naming the path.
std::string loadError(const std::string& path) {
  try {
    loadTraceReport(path);
  } catch (const H5Error& e) {
    ADD_FAILURE() << "H5Error leaked: " << e.what();
    return {};
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "no error for " << path;
  return {};
}

TEST(TraceReport, UnusableFilesGiveOneLineErrorsNamingThem) {
  TempDir dir;
  EXPECT_NE(loadError(dir.file("missing/trace.h5")).find("no trace file"), std::string::npos);
  EXPECT_NE(loadError(dir.path().string()).find("directory"), std::string::npos);

  std::ofstream(dir.file("text.h5")) << "not hdf5\n";
  EXPECT_NE(loadError(dir.file("text.h5")).find("not an HDF5 file"), std::string::npos);

  H5File::create(dir.file("other.h5")).writeAttribute("format", "something-else");
  EXPECT_NE(loadError(dir.file("other.h5")).find("something-else"), std::string::npos);

  {
    const auto old = H5File::create(dir.file("old.h5"));
    old.writeAttribute("format", "astraflow-trace");
    old.writeAttribute("format_version", std::int64_t{1});
  }
  EXPECT_NE(loadError(dir.file("old.h5")).find("format_version 1"), std::string::npos);

  // The right header over a missing table: the reader's own failure, cut to one line.
  {
    const auto empty = H5File::create(dir.file("empty.h5"));
    empty.writeAttribute("format", "astraflow-trace");
    empty.writeAttribute("format_version", kTraceFormatVersion);
  }
  EXPECT_NE(loadError(dir.file("empty.h5")).find("cannot read trace"), std::string::npos);
}

TEST(TraceReport, RunSummaryKeepsOrderAndPrintsValuesPlainly) {
  TempDir dir;
  std::ofstream(dir.file("summary.json"))
      << R"({"steps": 40, "name": "gsm8k run", "ok": true, "reward": 0.5, "none": null, "nested": {"a": [1, 2]}})";
  const std::vector<std::pair<std::string, std::string>> expected = {{"steps", "40"},  {"name", "gsm8k run"},
                                                                     {"ok", "true"},   {"reward", "0.5"},
                                                                     {"none", "null"}, {"nested", R"({"a":[1,2]})"}};
  EXPECT_EQ(readRunSummary(dir.file("summary.json")), expected);

  std::ofstream(dir.file("list.json")) << "[1, 2]";
  EXPECT_THROW(readRunSummary(dir.file("list.json")), Error);
  std::ofstream(dir.file("broken.json")) << R"({"steps": )";
  EXPECT_THROW(readRunSummary(dir.file("broken.json")), Error);
  EXPECT_THROW(readRunSummary(dir.file("absent.json")), Error);
}

}  // namespace
}  // namespace astraflow::io
