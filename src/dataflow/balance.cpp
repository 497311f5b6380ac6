// The balance report's arithmetic and text: threeZone (scale_up, scale_down or hold from the rollout wait fraction),
// classifyInstances (healthy or suspect rollout instances), formatBalanceReport and balanceReportJson.
#include "astraflow/dataflow/balance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace astraflow {

const char* branchName(ScalingBranch b) {
  switch (b) {
    case ScalingBranch::ScaleUp: return "scale_up";
    case ScalingBranch::ScaleDown: return "scale_down";
    case ScalingBranch::Hold: return "hold";
  }
  return "hold";
}

BalanceParams balanceParams(const ElasticSection& e) {
  return {e.every, e.tau_low, e.tau_high, e.rho, e.g_min, e.g_max};
}

ScalingDecision threeZone(int g, double w, std::uint64_t accepted, std::uint64_t consumed, const BalanceParams& p) {
  ScalingDecision d{ScalingBranch::Hold, g};
  if (w > p.tau_high) {
    // w → 1 would ask for an unbounded pool: G_max bounds it below.
    const double target = w < 1.0 ? std::ceil(static_cast<double>(g) / (1.0 - w)) : static_cast<double>(p.g_max);
    d = {ScalingBranch::ScaleUp, static_cast<int>(std::min(target, static_cast<double>(p.g_max)))};
  } else if (w < p.tau_low && accepted > 0 && consumed > 0) {
    const double shrunk =
        std::ceil(static_cast<double>(g) * static_cast<double>(consumed) / static_cast<double>(accepted) * p.rho);
    d = {ScalingBranch::ScaleDown, std::min(g, static_cast<int>(shrunk))};
  }
  d.g_target = std::clamp(d.g_target, p.g_min, std::max(p.g_min, p.g_max));
  return d;
}

void classifyInstances(std::vector<InstanceWindow>& instances) {
  std::vector<double> rates;
  std::uint64_t total = 0;
  for (const auto& i : instances) {
    rates.push_back(static_cast<double>(i.produced) / std::max(1, i.ranks));
    total += i.produced;
  }
  if (rates.empty()) return;
  std::vector<double> sorted = rates;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
  const double median = sorted[sorted.size() / 2];
  for (std::size_t k = 0; k < instances.size(); ++k) {
    const bool silent = instances[k].produced == 0 && total > 0;
    instances[k].status = silent || rates[k] < median / 3.0 ? "suspect" : "healthy";
  }
}

void decide(BalanceReport& r, const BalanceParams& p) {
  r.decision = threeZone(r.g, r.wait_fraction, r.accepted, r.consumed, p);
}

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

std::string formatBalanceReport(const BalanceReport& r) {
  std::string s = fmt::format("balance report v{} ({} window)\n", r.version_last, r.source);
  s += fmt::format("--- Window (last {} iterations: v{}..v{}) ---\n", r.iterations, r.version_first, r.version_last);
  s += fmt::format("wall_time_sec : {:.2f}\neval_time_sec : {:.2f}\ntraining_time_sec : {:.2f}\n", r.wall_s, r.eval_s,
                   r.training_s);
  s += fmt::format("avg_step_time_sec : {:.3f}\navg_batch_wait_sec : {:.3f}\nrollout_wait_fraction : {:.4f}\n",
                   r.avg_step_s, r.avg_wait_s, r.wait_fraction);
  s += "--- Production ---\n";
  s += fmt::format("total_raas_ranks : {}\nproduced : {}\nentered : {}\naccept_rate : {:.4f}\nconsumed : {}\n", r.g,
                   r.produced, r.accepted, ratio(r.accepted, r.produced), r.consumed);
  s += fmt::format(
      "stale_skipped : {}\nstale_rate : {:.4f}\nthroughput_per_rank : {:.2f}\nproduce_consume_ratio : {:.4f}\n",
      r.stale, ratio(r.stale, r.accepted), ratio(r.accepted, r.g), ratio(r.accepted, r.consumed));
  s += "--- Scaling decision ---\n";
  s += fmt::format("branch : {}\nG_target : {}\nestimated_delta_ranks : {:+d}\nweight_transfer_active : {}\n",
                   branchName(r.decision.branch), r.decision.g_target, r.decision.g_target - r.g,
                   r.weight_transfer_active ? "true" : "false");
  s += fmt::format("--- RaaS Instance Layout (last {} iterations) ---\n", r.iterations);
  s += fmt::format("{:<16} {:>5} {:>9} {:>9} {:>11} {:>15} {}\n", "uid", "ranks", "produced", "accepted", "accept_rate",
                   "throughput/rank", "status");
  int ranks = 0;
  std::uint64_t produced = 0, accepted = 0;
  bool accepted_known = true;
  for (const auto& i : r.instances) {
    ranks += i.ranks;
    produced += i.produced;
    if (i.accepted) {
      accepted += *i.accepted;
      s += fmt::format("{:<16} {:>5} {:>9} {:>9} {:>11.4f} {:>15.2f} {}\n", i.uid, i.ranks, i.produced, *i.accepted,
                       ratio(*i.accepted, i.produced), ratio(*i.accepted, i.ranks), i.status);
    } else {
      accepted_known = false;
      s += fmt::format("{:<16} {:>5} {:>9} {:>9} {:>11} {:>15.2f} {}\n", i.uid, i.ranks, i.produced, "n/a", "n/a",
                       ratio(i.produced, i.ranks), i.status);
    }
  }
  s += fmt::format("--- Total: {} instances, {} ranks, {} produced, {} accepted", r.instances.size(), ranks, produced,
                   accepted_known ? std::to_string(accepted) : std::string("n/a"));
  return s;
}

std::string balanceReportJson(const BalanceReport& r, const BalanceParams& p) {
  nlohmann::json instances = nlohmann::json::array();
  for (const auto& i : r.instances) {
    instances.push_back(
        {{"uid", i.uid},
         {"ranks", i.ranks},
         {"produced", i.produced},
         {"accepted", i.accepted ? nlohmann::json(*i.accepted) : nlohmann::json(nullptr)},
         {"accept_rate", i.accepted ? nlohmann::json(ratio(*i.accepted, i.produced)) : nlohmann::json(nullptr)},
         {"throughput_per_rank", ratio(i.accepted.value_or(i.produced), i.ranks)},
         {"status", i.status}});
  }
  const nlohmann::json j = {{"version", r.version_last},
                            {"source", r.source},
                            {"window",
                             {{"iterations", r.iterations},
                              {"version_first", r.version_first},
                              {"version_last", r.version_last},
                              {"wall_time_sec", r.wall_s},
                              {"eval_time_sec", r.eval_s},
                              {"training_time_sec", r.training_s},
                              {"avg_step_time_sec", r.avg_step_s},
                              {"avg_batch_wait_sec", r.avg_wait_s},
                              {"rollout_wait_fraction", r.wait_fraction}}},
                            {"production",
                             {{"total_raas_ranks", r.g},
                              {"produced", r.produced},
                              {"entered", r.accepted},
                              {"accept_rate", ratio(r.accepted, r.produced)},
                              {"consumed", r.consumed},
                              {"stale_skipped", r.stale},
                              {"stale_rate", ratio(r.stale, r.accepted)},
                              {"throughput_per_rank", ratio(r.accepted, r.g)},
                              {"produce_consume_ratio", ratio(r.accepted, r.consumed)}}},
                            {"scaling_decision",
                             {{"branch", branchName(r.decision.branch)},
                              {"G_target", r.decision.g_target},
                              {"estimated_delta_ranks", r.decision.g_target - r.g},
                              {"weight_transfer_active", r.weight_transfer_active},
                              {"tau_low", p.tau_low},
                              {"tau_high", p.tau_high},
                              {"rho", p.rho},
                              {"G_min", p.g_min},
                              {"G_max", p.g_max}}},
                            {"instances", instances}};
  return j.dump(2);
}

}  // namespace astraflow
