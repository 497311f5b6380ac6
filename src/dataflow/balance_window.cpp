// BalanceWindow: the dataflow rank's balance report (docs/architecture.md §9, paper A.4): every elastic.every versions
// of the lead policy, the window's trainer wait fraction, production and consumption, the
// three-zone decision and the per-instance table — in the log and as
// <run>/balance/report_<V>.json. The trainer's wait and step seconds are its own: it stages
// them (cumulative) with each version, so a window's are differences of two versions' figures.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "astraflow/dataflow/balance.hpp"
#include "dataflow/balance_window.hpp"
#include "dataflow/maintainer.hpp"

namespace astraflow::dataflow_detail {

namespace {

constexpr std::int64_t kSiteKey = std::int64_t{1} << 40;  // instance keys of remote sites: kSiteKey + pool uid

}  // namespace

BalanceWindow::BalanceWindow(RunWiring& w, const std::vector<PolicyState>& policies, const EvalScheduler& eval,
                             const SiteHub* hub, ElasticPools* elastic)
    : w_(w), cfg_(w.cfg), policies_(policies), eval_(eval), hub_(hub), elastic_(elastic) {}

void BalanceWindow::start() { report_base_ = bookTotals(); }

void BalanceWindow::produced(const Trajectory& t) {
  auto& tally = instances_[instanceKey(t)];
  tally.produced++;
  tally.newest_version = std::max(tally.newest_version, t.weight_version_max);
}

void BalanceWindow::entered(const Trajectory& t) { instances_[instanceKey(t)].entered++; }

// Per trajectory, so only an integer: a local rank, a spawned pool (its rank label base), or a
// remote site. Names and sizes are looked up once per report (instanceName, instanceRanks).
std::int64_t BalanceWindow::instanceKey(const Trajectory& t) const {
  if (t.pool_uid >= kSitePoolUidBase) return kSiteKey + t.pool_uid;
  if (t.producer_rank >= kSpawnRankLabel) return t.producer_rank - t.producer_rank % kSpawnRankLabel;
  return t.producer_rank;
}

std::string BalanceWindow::instanceName(std::int64_t key) const {
  if (key >= kSiteKey) {
    const auto uid = static_cast<std::uint32_t>(key - kSiteKey);
    if (hub_) {
      for (const auto& s : hub_->activeSites()) {
        if (s.pool_uid == uid) return "site:" + s.name;
      }
    }
    return fmt::format("site#{}", uid - kSitePoolUidBase);
  }
  if (key >= kSpawnRankLabel && elastic_) return elastic_->uidOfRank(static_cast<std::int32_t>(key));
  return fmt::format("rank{}", key);
}

int BalanceWindow::instanceRanks(std::int64_t key) const {
  if (key >= kSiteKey && hub_) {
    for (const auto& s : hub_->activeSites()) {
      if (s.pool_uid == static_cast<std::uint32_t>(key - kSiteKey)) return static_cast<int>(s.ranks);
    }
  }
  if (key >= kSpawnRankLabel && key < kSiteKey && elastic_) {
    return std::max(1, elastic_->ranksOf(elastic_->uidOfRank(static_cast<std::int32_t>(key))));
  }
  return 1;
}

BookTotals BalanceWindow::bookTotals() const {
  BookTotals b;
  for (const auto& p : policies_) {
    const auto& c = p.assembler->counters();
    b.produced += c.produced;
    b.entered += c.produced - c.filtered;
    b.consumed += c.consumed;
    b.stale += c.stale_dropped;
  }
  return b;
}

// Cumulative books at each lead version, so `astraflow trace --balance K` can cut any window
// from the trace alone: "books" (count = entered of total = produced), "books_used" (count =
// consumed of total = the trajectories that left the buffer: consumed + stale dropped).
void BalanceWindow::recordBooks(std::int64_t v) {
  const BookTotals b = bookTotals();
  const double t = w_.now();
  w_.event(TraceKind::Books, t, v, 0, b.entered, {.total = b.produced});
  w_.event(TraceKind::BooksUsed, t, v, 0, b.consumed, {.total = b.consumed + b.stale});
}

void BalanceWindow::report(const PolicyState& lead, std::int64_t v) {
  const BalanceParams params = balanceParams(cfg_.elastic);
  BalanceReport r;
  r.version_last = v;
  r.version_first = std::max<std::int64_t>(v - params.every, w_.resume ? w_.resume_version : 0);
  timeWindow(lead, r);
  const BookTotals now = bookTotals();
  r.produced = now.produced - report_base_.produced;
  r.accepted = now.entered - report_base_.entered;
  r.consumed = now.consumed - report_base_.consumed;
  r.stale = now.stale - report_base_.stale;
  report_base_ = now;
  r.g = collectInstances(r);
  classifyInstances(r.instances);
  decide(r, params);

  spdlog::info("{}", formatBalanceReport(r));
  const auto dir = w_.run_dir / "balance";
  std::filesystem::create_directories(dir);
  const auto path = dir / fmt::format("report_{}.json", v);
  std::ofstream(path) << balanceReportJson(r, params) << "\n";
  // The window's rollout ranks, and the ranks the decision asks for.
  w_.event(TraceKind::Balance, w_.now(), v, 0, static_cast<std::uint64_t>(r.g));
  w_.event(TraceKind::BalanceTarget, w_.now(), v, 0, static_cast<std::uint64_t>(r.decision.g_target));
  actOnTarget(r, path.string());
}

// The window's iterations from the lead trainer's clock, its wall time from the publish times,
// and the evaluation time inside it.
void BalanceWindow::timeWindow(const PolicyState& lead, BalanceReport& r) const {
  const std::int64_t v = r.version_last;
  auto at = [](const std::vector<double>& times, std::int64_t i) {
    return i >= 0 && i < static_cast<std::int64_t>(times.size()) ? times[static_cast<std::size_t>(i)] : -1.0;
  };
  auto clock = [&](std::int64_t i) {
    return i >= 0 && i < static_cast<std::int64_t>(lead.trainer_clock.size())
               ? lead.trainer_clock[static_cast<std::size_t>(i)]
               : TrainerClock{-1, -1};
  };
  // A resumed trainer's clock restarts at zero: the window then starts at the first version
  // this segment published.
  std::int64_t first = r.version_first;
  while (first < v && clock(first).wait_seconds < 0) ++first;
  r.version_first = first;
  r.iterations = static_cast<int>(v - first);
  const TrainerClock a = clock(first), b = clock(v);
  const double wait = std::max(0.0, b.wait_seconds - a.wait_seconds);
  const double iterations_s = wait + std::max(0.0, b.step_seconds - a.step_seconds);
  const double start = at(lead.published_at, r.version_first), end = at(lead.published_at, v);
  r.wall_s = start >= 0 && end >= 0 ? end - start : 0.0;
  for (const auto& [t0, t1] : eval_.spans()) {
    if (start >= 0) r.eval_s += std::max(0.0, std::min(t1, end) - std::max(t0, start));
  }
  r.training_s = iterations_s - wait;
  r.avg_step_s = r.iterations ? iterations_s / r.iterations : 0.0;
  r.avg_wait_s = r.iterations ? wait / r.iterations : 0.0;
  r.wait_fraction = iterations_s > 0 ? wait / iterations_s : 0.0;
}

// Every rollout instance's row, those that produced nothing included, and the window's tallies
// cleared; returns the ranks serving now (a pool retired in the window still has its row).
int BalanceWindow::collectInstances(BalanceReport& r) {
  int g = 0;
  for (const auto& pool : w_.map.pools()) {
    for (int rank : pool.world_ranks) instances_.try_emplace(rank);
    g += static_cast<int>(pool.world_ranks.size());
  }
  if (elastic_) {
    for (const auto& p : elastic_->activePools()) {
      instances_.try_emplace(p.label);
      g += p.ranks;
    }
  }
  if (hub_) {
    for (const auto& s : hub_->activeSites()) {
      instances_.try_emplace(kSiteKey + s.pool_uid);
      g += static_cast<int>(s.ranks);
    }
  }
  for (const auto& [key, tally] : instances_) {
    InstanceWindow i;
    i.uid = instanceName(key);
    i.ranks = instanceRanks(key);
    i.produced = tally.produced;
    i.accepted = tally.entered;
    // Weights still moving: an instance whose newest trajectory used weights two or more
    // versions old at the window's end.
    if (tally.produced > 0 && tally.newest_version < r.version_last - 1) r.weight_transfer_active = true;
    r.instances.push_back(std::move(i));
  }
  instances_.clear();
  return g;
}

// elastic.mode: auto follows G_target; external asks the maintainer command (or reads the
// target file). Only spawned pools are retired: the initial layout's ranks stay.
void BalanceWindow::actOnTarget(const BalanceReport& r, const std::string& report_path) {
  if (!elastic_) return;
  const auto& e = cfg_.elastic;
  std::optional<int> target;
  std::string why;
  if (e.mode == ElasticMode::Auto) {
    target = r.decision.g_target;
  } else if (!e.command.empty()) {
    target = askMaintainer(e, report_path, why);
  } else {
    const auto file = e.target_file.empty() ? (w_.run_dir / "balance" / "target").string() : e.target_file;
    target = readTargetFile(e, file, why);
  }
  if (!target) {
    if (!why.empty()) spdlog::warn("elastic: {}; the pool keeps its {} rank(s)", why, r.g);
    return;
  }
  const int delta = *target - r.g;
  if (delta > 0) {
    // A failed spawn (no slots, a launcher refusal) waits 5 s, 10 s, 20 s … (≤ 5 min) before the
    // next attempt; training goes on meanwhile.
    if (w_.now() < spawn_retry_at_) {
      spdlog::info("elastic: target {} > {} rank(s); next spawn attempt in {:.0f} s", *target, r.g,
                   spawn_retry_at_ - w_.now());
    } else if (elastic_->spawn(std::min(delta, e.spawn_max))) {
      spawn_failures_in_row_ = 0;
    } else {
      ++spawn_failures_in_row_;
      spawn_retry_at_ = w_.now() + std::min(300.0, 5.0 * std::pow(2.0, spawn_failures_in_row_ - 1));
    }
  } else if (delta < 0) {
    std::set<std::string> suspects;
    for (const auto& i : r.instances) {
      if (i.status == "suspect") suspects.insert(i.uid);
    }
    if (elastic_->retire(-delta, suspects) == 0) {
      spdlog::info("elastic: target {} below {} rank(s), but no spawned pool is left to retire", *target, r.g);
    }
  }
}

}  // namespace astraflow::dataflow_detail
