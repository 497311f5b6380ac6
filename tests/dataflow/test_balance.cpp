// The three-zone policy on the paper's formula (§4.2.1, A.4: τ_low 0.05, τ_high 0.10, ρ 1.10):
// scale up, scale down, hold, the dead band's edges, the bounds; and the report's template.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "astraflow/dataflow/balance.hpp"

using namespace astraflow;

namespace {

const BalanceParams kPaper{10, 0.05, 0.10, 1.10, 1, 64};

}  // namespace

TEST(ThreeZone, ScalesUpWhenTheTrainerStarves) {
  // G = 6, w = 0.40: ⌈6 / 0.6⌉ = 10.
  const auto d = threeZone(6, 0.40, 1000, 1000, kPaper);
  EXPECT_EQ(d.branch, ScalingBranch::ScaleUp);
  EXPECT_EQ(d.g_target, 10);
  // Just above τ_high: ⌈6 / 0.899⌉ = 7.
  EXPECT_EQ(threeZone(6, 0.101, 1000, 1000, kPaper).g_target, 7);
  // The ceiling, not rounding: ⌈4 / 0.75⌉ = ⌈5.33⌉ = 6.
  EXPECT_EQ(threeZone(4, 0.25, 10, 10, kPaper).g_target, 6);
}

TEST(ThreeZone, ScalesDownWhenOverAllocated) {
  // G = 11, w = 0.01, consumed/accepted = 0.5: ⌈11 · 0.5 · 1.1⌉ = ⌈6.05⌉ = 7.
  const auto d = threeZone(11, 0.01, 2000, 1000, kPaper);
  EXPECT_EQ(d.branch, ScalingBranch::ScaleDown);
  EXPECT_EQ(d.g_target, 7);
  // min(G, …): consuming more than accepted never grows the pool on this branch.
  const auto e = threeZone(11, 0.0, 1000, 1500, kPaper);
  EXPECT_EQ(e.branch, ScalingBranch::ScaleDown);
  EXPECT_EQ(e.g_target, 11);
}

TEST(ThreeZone, HoldsInTheDeadBandAndWithoutTraffic) {
  EXPECT_EQ(threeZone(8, 0.07, 100, 50, kPaper).branch, ScalingBranch::Hold);
  EXPECT_EQ(threeZone(8, 0.07, 100, 50, kPaper).g_target, 8);
  // The edges belong to the dead band: w = τ_high holds, w = τ_low holds.
  EXPECT_EQ(threeZone(8, 0.10, 100, 50, kPaper).branch, ScalingBranch::Hold);
  EXPECT_EQ(threeZone(8, 0.05, 100, 50, kPaper).branch, ScalingBranch::Hold);
  EXPECT_EQ(threeZone(8, 0.0499, 100, 50, kPaper).branch, ScalingBranch::ScaleDown);
  // Low w but no production or no consumption in the window: hold.
  EXPECT_EQ(threeZone(8, 0.0, 0, 50, kPaper).branch, ScalingBranch::Hold);
  EXPECT_EQ(threeZone(8, 0.0, 100, 0, kPaper).branch, ScalingBranch::Hold);
}

TEST(ThreeZone, TargetsStayWithinBounds) {
  BalanceParams p = kPaper;
  p.g_min = 6;
  p.g_max = 11;
  EXPECT_EQ(threeZone(10, 0.5, 10, 10, p).g_target, 11);   // ⌈20⌉ capped
  EXPECT_EQ(threeZone(10, 1.0, 10, 10, p).g_target, 11);   // w = 1: the cap, not a division by zero
  EXPECT_EQ(threeZone(8, 0.0, 1000, 100, p).g_target, 6);  // ⌈0.88⌉ raised to G_min
}

TEST(BalanceReport, TemplateAndJsonCarryTheFigures) {
  BalanceReport r;
  r.version_first = 10;
  r.version_last = 20;
  r.iterations = 10;
  r.wall_s = 50;
  r.training_s = 30;
  r.avg_step_s = 5;
  r.avg_wait_s = 2;
  r.wait_fraction = 0.4;
  r.g = 3;
  r.produced = 1000;
  r.accepted = 900;
  r.consumed = 800;
  r.stale = 45;
  r.instances = {{"rank3", 1, 500, 450, ""}, {"rank4", 1, 490, 441, ""}, {"site:b", 1, 10, 9, ""}};
  classifyInstances(r.instances);
  EXPECT_EQ(r.instances[0].status, "healthy");
  EXPECT_EQ(r.instances[2].status, "suspect");  // under a third of the median
  decide(r, kPaper);
  EXPECT_EQ(r.decision.g_target, 5);  // ⌈3 / 0.6⌉
  const std::string text = formatBalanceReport(r);
  for (const char* line :
       {"rollout_wait_fraction : 0.4000", "total_raas_ranks : 3", "entered : 900", "accept_rate : 0.9000",
        "stale_rate : 0.0500", "produce_consume_ratio : 1.1250", "branch : scale_up", "G_target : 5",
        "estimated_delta_ranks : +2", "--- Total: 3 instances, 3 ranks, 1000 produced, 900 accepted"}) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing '" << line << "' in\n" << text;
  }
  const auto j = nlohmann::json::parse(balanceReportJson(r, kPaper));
  EXPECT_EQ(j["scaling_decision"]["branch"], "scale_up");
  EXPECT_EQ(j["scaling_decision"]["G_target"], 5);
  EXPECT_EQ(j["production"]["entered"], 900);
  EXPECT_EQ(j["instances"][2]["status"], "suspect");
  EXPECT_DOUBLE_EQ(j["window"]["rollout_wait_fraction"].get<double>(), 0.4);
}
