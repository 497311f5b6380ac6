#pragma once
// The balance report and the three-zone scaling policy (docs/architecture.md §9, paper §4.2.1 and A.4).
// Pure data and formatting: the dataflow rank fills a report every K trainer versions from what
// it observes live, and `astraflow trace --balance K` fills the same report from a run's trace.
//
//   w = Σ wait_k / Σ step_k over the window's trainer iterations (step = the whole iteration,
//   waiting for the batch included, so 0 ≤ w ≤ 1)
//   G_target = ⌈G / (1 − w)⌉                                  if w > τ_high        (scale_up)
//            = min(G, ⌈G · (consumed / accepted) · ρ⌉)         if w < τ_low and the window
//                                                               produced and consumed (scale_down)
//            = G                                               otherwise            (hold)
// then clamped to [G_min, G_max]. G counts rollout ranks (the paper's rollout GPUs).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"

namespace astraflow {

struct BalanceParams {
  int every = 10;          // K: trainer versions per report (0: no reports)
  double tau_low = 0.05;   // below: over-allocated (scale down)
  double tau_high = 0.10;  // above: the trainer starves (scale up)
  double rho = 1.10;       // shrink margin
  int g_min = 1;           // rollout ranks, bounds of G_target
  int g_max = 1 << 20;
};

BalanceParams balanceParams(const ElasticSection& elastic);

enum class ScalingBranch { ScaleUp, ScaleDown, Hold };
const char* branchName(ScalingBranch b);  // "scale_up" | "scale_down" | "hold"

struct ScalingDecision {
  ScalingBranch branch = ScalingBranch::Hold;
  int g_target = 0;
};

// The three-zone policy on a window's figures (paper §4.2.1).
ScalingDecision threeZone(int g, double w, std::uint64_t accepted, std::uint64_t consumed, const BalanceParams& p);

// One rollout instance in the window: a rollout rank, or a remote site (its ranks together).
struct InstanceWindow {
  std::string uid;  // "rank3", "site:site_b"
  int ranks = 1;
  std::uint64_t produced = 0;
  std::optional<std::uint64_t> accepted;  // unknown in a replay from the trace alone
  std::string status = "healthy";         // healthy | suspect
};

// Suspect: produced nothing while others did, or produced under a third of the median per rank.
void classifyInstances(std::vector<InstanceWindow>& instances);

struct BalanceReport {
  std::int64_t version_first = 0, version_last = 0;  // the window: trainer versions (first, last]
  int iterations = 0;
  double wall_s = 0, eval_s = 0, training_s = 0, avg_step_s = 0, avg_wait_s = 0, wait_fraction = 0;
  int g = 0;  // rollout ranks
  std::uint64_t produced = 0, accepted = 0, consumed = 0, stale = 0;
  ScalingDecision decision;
  bool weight_transfer_active = false;  // the trainers published versions in the window
  std::vector<InstanceWindow> instances;
  std::string source = "live";  // live | trace
};

// Fills decision from the figures (the caller set g, wait_fraction, accepted, consumed).
void decide(BalanceReport& r, const BalanceParams& p);
// The paper's template (A.4), as text for the log.
std::string formatBalanceReport(const BalanceReport& r);
// The same report as one JSON object (what <run>/balance/report_<V>.json holds).
std::string balanceReportJson(const BalanceReport& r, const BalanceParams& p);

}  // namespace astraflow
