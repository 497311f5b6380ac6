// TraceWriter: exact round trips, what survives a crash, readability by the real h5dump, and
// merging per-rank files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "astraflow/core/trace_kinds.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "io/h5dump.hpp"
#include "io/temp_dir.hpp"

namespace astraflow::io {
namespace {

using test::TempDir;

TraceEvent makeEvent(int i, int rank = 0) {
  static const char* const kRoles[] = {"dataflow", "trainer", "rollout"};
  static const char* const kKinds[] = {"generate", "train_step", "weights_send", "rma_put"};
  return TraceEvent{rank,
                    kRoles[i % 3],
                    kKinds[i % 4],
                    0.001 * i + rank * 1e-4,
                    0.001 * i + rank * 1e-4 + 0.0005,
                    static_cast<std::int64_t>(i / 10),
                    static_cast<std::uint64_t>(i) * 4096u + 1u,
                    static_cast<std::uint64_t>(i % 7),
                    i % 3 - 1,
                    static_cast<std::uint64_t>(i % 11),
                    i % 5 - 1};
}

TEST(TraceWriter, ThousandEventsRoundTripExactly) {
  TempDir dir;
  const auto path = dir.file("trace.h5");
  std::vector<TraceEvent> expected;
  {
    TraceWriter writer(path, 100);
    for (int i = 0; i < 1000; ++i) {
      expected.push_back(makeEvent(i, 3));
      writer.record(expected.back());
      // Appends happen exactly at multiples of flush_every.
      EXPECT_EQ(writer.eventsWritten(), static_cast<std::size_t>((i + 1) / 100 * 100));
    }
    EXPECT_EQ(writer.eventsBuffered(), 0u);
  }
  const auto events = readTraceEvents(path);
  ASSERT_EQ(events.size(), 1000u);
  EXPECT_EQ(events, expected);

  const auto file = H5File::openReadOnly(path);
  EXPECT_EQ(file.readStringAttribute("format"), "astraflow-trace");
  EXPECT_EQ(file.readInt64Attribute("format_version"), 3);
  // Every kind of core/trace_kinds.hpp, each name mapping back to its kind (plot_run.py reads it).
  const std::string kinds = file.readStringAttribute("kinds");
  std::size_t listed = 0;
  for (std::size_t at = 0; at <= kinds.size(); ++listed) {
    const std::size_t comma = std::min(kinds.find(',', at), kinds.size());
    const auto kind = traceKindOf(kinds.substr(at, comma - at));
    ASSERT_TRUE(kind.has_value()) << kinds.substr(at, comma - at);
    EXPECT_EQ(traceKindName(*kind), kinds.substr(at, comma - at));
    at = comma + 1;
  }
  EXPECT_EQ(listed, kTraceKindNames.size());
  EXPECT_EQ(file.openDataset("events").type().memberNames(),
            (std::vector<std::string>{"rank", "role", "kind", "t_start", "t_end", "version", "bytes", "count", "policy",
                                      "staleness", "total"}));
}

TEST(TraceWriter, DestructorAndFlushWriteTheBuffer) {
  TempDir dir;
  const auto path = dir.file("partial.h5");
  {
    TraceWriter writer(path, 100);
    for (int i = 0; i < 7; ++i) writer.record(makeEvent(i));
    EXPECT_EQ(writer.eventsWritten(), 0u);
    writer.flush();
    EXPECT_EQ(writer.eventsWritten(), 7u);
    for (int i = 7; i < 12; ++i) writer.record(makeEvent(i));
    TraceWriter moved = std::move(writer);  // the buffer travels with the writer
    EXPECT_EQ(moved.eventsBuffered(), 5u);
  }
  const auto events = readTraceEvents(path);
  ASSERT_EQ(events.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(events[i], makeEvent(i));
}

TEST(TraceWriter, LongStringsAreTruncatedToTheirFields) {
  TempDir dir;
  const auto path = dir.file("truncate.h5");
  const std::string role16 = "0123456789abcdef";
  const std::string long_kind(100, 'k');
  // 15 ASCII bytes then a 2-byte character that would straddle the 16-byte boundary.
  const std::string utf8_role = std::string(15, 'r') + "\xC3\xA9";
  {
    TraceWriter writer(path);
    writer.record({1, role16 + "-overflow", long_kind, 1.0, 2.0, 5, 10});
    writer.record({2, role16, "k", 3.0, 4.0, 6, 11});
    writer.record({3, utf8_role, "", 5.0, 6.0, 7, 12});
  }
  const auto events = readTraceEvents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].role, role16);
  EXPECT_EQ(events[0].kind, std::string(kTraceKindBytes, 'k'));
  EXPECT_EQ(events[0].version, 5);  // the neighbouring fields are intact
  EXPECT_EQ(events[1].role, role16);
  EXPECT_EQ(events[1].kind, "k");
  EXPECT_EQ(events[2].role, std::string(15, 'r'));
  EXPECT_EQ(events[2].kind, "");
  EXPECT_EQ(events[2].bytes, 12u);
}

// A writer that dies without closing anything keeps every event up to its last flush.
TEST(TraceWriter, CrashKeepsEventsUpToLastFlush) {
  TempDir dir;
  const auto path = dir.file("crash.h5");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child touches no MPI; _exit skips every destructor and HDF5's atexit close.
    try {
      auto* writer = new TraceWriter(path, 100);  // deliberately leaked
      for (int i = 0; i < 250; ++i) writer->record(makeEvent(i));
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const auto events = readTraceEvents(path);
  ASSERT_EQ(events.size(), 200u);
  EXPECT_EQ(events.front(), makeEvent(0));
  EXPECT_EQ(events.back(), makeEvent(199));
}

TEST(TraceWriter, ReadableByRealH5dump) {
  TempDir dir;
  const auto path = dir.file("dump.h5");
  {
    TraceWriter writer(path, 2);
    writer.record({4, "rollout", "weights_recv", 12.5, 13.0, 987654321, 1u << 20});
    writer.record({0, "dataflow", "curate", 14.0, 14.5, 3, 64});
    writer.record({1, "trainer", "train_step", 15.0, 16.0, 4, 0});
  }
  int status = 0;
  const auto output = test::runH5dump(path, &status);
  ASSERT_EQ(status, 0) << "h5dump failed:\n" << output;
  EXPECT_NE(output.find("DATASET \"events\""), std::string::npos) << output;
  for (const char* field :
       {"rank", "role", "kind", "t_start", "t_end", "version", "bytes", "count", "policy", "staleness", "total"}) {
    EXPECT_NE(output.find(std::string("\"") + field + "\""), std::string::npos) << "field " << field << " missing:\n"
                                                                                << output;
  }
  // h5dump shows the NUL padding of fixed strings ("rollout\000..."): match the opening quote.
  EXPECT_NE(output.find("\"rollout"), std::string::npos) << output;
  EXPECT_NE(output.find("\"weights_recv"), std::string::npos) << output;
  EXPECT_NE(output.find("987654321"), std::string::npos) << output;
  EXPECT_NE(output.find("astraflow-trace"), std::string::npos) << output;
}

TEST(TraceMerge, TwoFilesMergeSortedByStartTime) {
  TempDir dir;
  const auto a = dir.file("rank_0.h5");
  const auto b = dir.file("rank_1.h5");
  const auto merged = dir.file("trace.h5");
  std::vector<TraceEvent> all;
  {
    TraceWriter wa(a, 16);
    TraceWriter wb(b, 16);
    for (int i = 0; i < 60; ++i) {
      // Rank 1 writes its events in decreasing time, so the merge has to sort, not zip.
      TraceEvent ea = makeEvent(i, 0);
      TraceEvent eb = makeEvent(200 - 3 * i, 1);
      wa.record(ea);
      wb.record(eb);
      all.push_back(ea);
      all.push_back(eb);
    }
  }
  mergeTraceFiles({a, b}, merged);
  const auto events = readTraceEvents(merged);
  ASSERT_EQ(events.size(), 120u);
  EXPECT_TRUE(std::is_sorted(events.begin(), events.end(),
                             [](const TraceEvent& x, const TraceEvent& y) { return x.t_start < y.t_start; }));
  auto by_time = [](const TraceEvent& x, const TraceEvent& y) {
    return std::tie(x.t_start, x.rank, x.kind) < std::tie(y.t_start, y.rank, y.kind);
  };
  auto expected = all;
  auto got = events;
  std::sort(expected.begin(), expected.end(), by_time);
  std::sort(got.begin(), got.end(), by_time);
  EXPECT_EQ(got, expected);  // nothing lost, duplicated or altered
  const auto file = H5File::openReadOnly(merged);
  EXPECT_EQ(file.readStringAttribute("format"), "astraflow-trace");

  EXPECT_THROW(mergeTraceFiles({a, b}, a), Error);
  EXPECT_EQ(readTraceEvents(a).size(), 60u);  // the refused merge left the input alone
}

TEST(TraceMerge, RejectsFilesThatAreNotTraces) {
  TempDir dir;
  const auto other = dir.file("other.h5");
  {
    auto file = H5File::create(other);
    file.writeVector("events", std::vector<double>{1.0});
  }
  try {
    (void)readTraceEvents(other);
    FAIL() << "expected an H5Error";
  } catch (const H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an astraflow trace"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mergeTraceFiles({other}, dir.file("out.h5")), H5Error);
}

}  // namespace
}  // namespace astraflow::io
