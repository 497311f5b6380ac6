// Typed rank reports: every role's report survives the byte form field for field, bad bytes are
// refused with the field named (never a crash), and the summary's JSON keeps the key names the
// scripts and tests read.
#include <gtest/gtest.h>

#include <random>

#include "astraflow/core/error.hpp"
#include "astraflow/core/rank_report.hpp"
#include "run/summary.hpp"

namespace astraflow {
namespace {

// A report of every role with every field set to a distinct non-default value.
std::vector<RankReport> filledReports() {
  RolloutReport ro;
  ro.pushed = 11, ro.eval_pushed = 2, ro.oversize = 1, ro.malformed_tasks = 3, ro.generated_tokens = 4096;
  ro.generate_seconds = 1.25, ro.task_wait_seconds = 0.5, ro.weight_pull_seconds = 0.125;
  ro.environment_jobs = 40, ro.stream_steps = 100, ro.stream_steps_beside_environment = 60;
  ro.policies.push_back({"solver", 7, 8, 1, 6, 1, 1 << 20, 1 << 18, 2, 0xFEDCBA9876543210ULL});
  ro.policies.push_back({"verifier", 5, 6, 2, 4, 0, 1 << 19, 1 << 17, 0, 42});

  TrainerReport tr;
  tr.steps = 9, tr.final_version = 9, tr.trajectories_trained = 288, tr.tokens_trained = 9000;
  tr.batch_wait_seconds = 3, tr.step_seconds = 1, tr.foreign_trajectories = 5, tr.trajectories_from_remote_sites = 6;
  tr.max_staleness = 2, tr.staleness_violations = 0, tr.version_mismatches = 1, tr.skipped_steps = 3;
  tr.mean_reward = 0.75, tr.weights_hash = 0xFFFFFFFFFFFFFFFFULL;

  DataflowReport df;
  df.versions = 9, df.produced = 300, df.accepted = 290, df.filtered = 6, df.filtered_nonfinite = 1;
  df.filtered_error = 2, df.stale_dropped = 4, df.consumed = 288, df.batches = 9, df.buffered = 2, df.replayed = 7;
  df.malformed = 1, df.unroutable = 2, df.tasks_unsent = 3, df.eval_received = 40, df.eval_rounds = 2;
  df.eval_accuracy_start = 0.25, df.eval_accuracy_end = 0.5, df.wall_seconds = 12.5, df.segment_wall_seconds = 10;
  df.trajectories_written = 300;
  PolicyBooks books{"solver", 9, 300, 290, 6, 4, 288, 7, 2, 8, 1, 4096, 100, 1000};
  df.policies.push_back(books);
  df.roles.push_back({"solver", 0.125, 0.375});
  df.plugins.push_back({"filter.0.zero_advantage@solver", "dropped", 12});
  df.plugins.push_back({"filter.0.zero_advantage@solver", "kept", 30});
  SiteHubFigures hub;
  hub.sites_refused = 1, hub.sites_malformed = 2, hub.site_tasks_reissued = 3, hub.sites_stalled = 1;
  hub.sites_joined = 1, hub.sites_lost = 1, hub.sites_auth_failed = 4;
  hub.sites.push_back({"west", 2, 100, 90, 9, 1, 1 << 22, 3, 1 << 21, true});
  df.cross_site = hub;
  df.elastic = ElasticFigures{2, 1, 2, 0, 17, 3, 1, 0};

  GatewayReport gw;
  gw.tasks_received = 100, gw.tasks_dropped = 1, gw.trajectories_forwarded = 98, gw.trajectories_undelivered = 1;
  gw.malformed = 2, gw.home_lost = true;
  gw.policies.push_back({"solver", 9, 1, 1 << 22, 1, 9, 77});

  return {{0, "dataflow", df}, {3, "rollout:pool0", ro}, {10001, "trainer:solver", tr}, {5, "gateway", gw}};
}

bool sameBytes(const RankReport& a, const RankReport& b) { return encodeRankReport(a) == encodeRankReport(b); }

TEST(RankReport, EveryRoleRoundTripsFieldForField) {
  for (const auto& report : filledReports()) {
    const auto bytes = encodeRankReport(report);
    const RankReport back = decodeRankReport(bytes);
    EXPECT_EQ(back.rank, report.rank);
    EXPECT_EQ(back.label, report.label);
    EXPECT_EQ(back.figures.index(), report.figures.index()) << report.label;
    EXPECT_STREQ(back.roleName(), report.roleName());
    EXPECT_TRUE(sameBytes(back, report)) << report.label;
    // Spot checks that the bytes carry values, not just a consistent shape.
    if (const auto* ro = std::get_if<RolloutReport>(&back.figures)) {
      ASSERT_EQ(ro->policies.size(), 2u);
      EXPECT_EQ(ro->policies[0].weights_hash, 0xFEDCBA9876543210ULL);
      EXPECT_EQ(ro->policies[1].name, "verifier");
      EXPECT_DOUBLE_EQ(ro->weight_pull_seconds, 0.125);
    }
    if (const auto* df = std::get_if<DataflowReport>(&back.figures)) {
      ASSERT_TRUE(df->cross_site.has_value());
      EXPECT_TRUE(df->cross_site->sites.at(0).lost);
      ASSERT_TRUE(df->elastic.has_value());
      EXPECT_EQ(df->elastic->elastic_tasks_reissued, 17u);
      EXPECT_EQ(df->plugins.at(1).counter, "kept");
    }
  }
  // The memory plan's total, the measured peak and the CPU seconds travel with every role's report.
  RankReport planned{
      2,  "rollout:pool1", RolloutReport{}, 0x0123456789ULL, 0xABCDEF012345ULL, 0x55AA55AAULL, 0x1234ABCDULL, 12.375,
      1.5};
  const auto planned_back = decodeRankReport(encodeRankReport(planned));
  EXPECT_EQ(planned_back.memory_plan_private_bytes, 0x55AA55AAULL);
  EXPECT_EQ(planned_back.peak_private_bytes, 0x1234ABCDULL);
  EXPECT_EQ(planned_back.memory_plan_bytes, 0x0123456789ULL);
  EXPECT_EQ(planned_back.peak_rss_bytes, 0xABCDEF012345ULL);
  EXPECT_DOUBLE_EQ(planned_back.cpu_seconds, 12.375);
  EXPECT_DOUBLE_EQ(planned_back.startup_cpu_seconds, 1.5);
  // An absent optional stays absent.
  RankReport plain{0, "dataflow", DataflowReport{}};
  const auto back = decodeRankReport(encodeRankReport(plain));
  EXPECT_FALSE(std::get<DataflowReport>(back.figures).cross_site.has_value());
  EXPECT_FALSE(std::get<DataflowReport>(back.figures).elastic.has_value());
}

TEST(RankReport, EveryTruncationIsRefusedWithTheField) {
  for (const auto& report : filledReports()) {
    const auto bytes = encodeRankReport(report);
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
      try {
        decodeRankReport(std::span(bytes).first(cut));
        ADD_FAILURE() << report.label << ": a report cut to " << cut << " of " << bytes.size() << " bytes decoded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank report"), std::string::npos) << e.what();
      }
    }
    auto longer = bytes;
    longer.push_back(std::byte{0});
    EXPECT_THROW(decodeRankReport(longer), Error) << "trailing bytes accepted";
  }
}

TEST(RankReport, BadTagsAreNamed) {
  // gateway: the role index follows the format, rank, label, the two memory figures, the two CPU
  // figures and the two private-memory figures
  auto bytes = encodeRankReport(filledReports()[3]);
  const std::size_t role_at = 2 + 4 + 4 + std::string("gateway").size() + 8 + 8 + 8 + 8 + 8 + 8;
  ASSERT_EQ(bytes[role_at], std::byte{3});
  bytes[role_at] = std::byte{4};
  try {
    decodeRankReport(bytes);
    FAIL() << "role index 4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("role index 4"), std::string::npos) << e.what();
  }
  bytes = encodeRankReport(filledReports()[3]);
  bytes[0] = std::byte{8};  // an older format
  EXPECT_THROW(decodeRankReport(bytes), Error);
  // home_lost is the last byte before the policy count: make it 2.
  GatewayReport lost_home;
  lost_home.home_lost = true;
  bytes = encodeRankReport(RankReport{5, "g", lost_home});
  ASSERT_EQ(bytes[bytes.size() - 5], std::byte{1});
  bytes[bytes.size() - 5] = std::byte{2};
  try {
    decodeRankReport(bytes);
    FAIL() << "a bool of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("home_lost"), std::string::npos) << e.what();
  }
}

TEST(RankReport, RandomMutationsNeverCrash) {
  std::mt19937 rng(2026);
  const auto reports = filledReports();
  int decoded = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    auto bytes = encodeRankReport(reports[static_cast<std::size_t>(i) % reports.size()]);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng() & 0xFF);
    try {
      decodeRankReport(bytes);
      ++decoded;
    } catch (const Error&) {
      ++refused;
    }
  }
  // Both outcomes happen: flipped counters decode (they are plain numbers), flipped lengths do not.
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}

TEST(RankReport, SummaryJsonKeepsTheKeyNames) {
  const auto reports = filledReports();
  const auto df = run_detail::rankReportJson(reports[0]);
  EXPECT_EQ(df["role"], "dataflow");
  EXPECT_EQ(df["policy.solver.produced"], 300);
  EXPECT_EQ(df["policy.solver.weights_compared_elements"], 1000);
  EXPECT_EQ(df["role.solver.eval_reward_end"], 0.375);
  EXPECT_EQ(df["plugin.filter.0.zero_advantage@solver.dropped"], 12);
  EXPECT_EQ(df["site.west.lost"], true);
  EXPECT_EQ(df["site.west.max_queued_bytes"], 1 << 21);
  EXPECT_EQ(df["sites_joined"], 1);
  EXPECT_EQ(df["elastic_tasks_reissued"], 17);
  EXPECT_FALSE(df.contains("policies")) << "lists are flattened into keys";

  const auto ro = run_detail::rankReportJson(reports[1]);
  EXPECT_EQ(ro["rank"], 3);
  EXPECT_EQ(ro["label"], "rollout:pool0");
  EXPECT_EQ(ro["weight_pulls.solver"], 8);
  EXPECT_EQ(ro["weights_hash.solver"], 0xFEDCBA9876543210ULL);
  EXPECT_EQ(ro["weight_pulls"], 8 + 6) << "totals over the served policies";
  EXPECT_EQ(ro["torn_retries"], 2);
  EXPECT_EQ(ro["final_version"], 7) << "the first served policy's";

  const auto tr = run_detail::rankReportJson(reports[2]);
  EXPECT_DOUBLE_EQ(tr["wait_fraction"].get<double>(), 0.75);
  EXPECT_EQ(tr["weights_hash"], 0xFFFFFFFFFFFFFFFFULL);

  const auto gw = run_detail::rankReportJson(reports[3]);
  EXPECT_EQ(gw["weight_updates_rejected.solver"], 1);
  EXPECT_EQ(gw["home_lost"], true);
}

}  // namespace
}  // namespace astraflow
