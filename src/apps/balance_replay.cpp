// `astraflow trace <run> --balance K`: the balance report (include/astraflow/dataflow/balance.hpp)
// recomputed from the run's trace.h5 alone, for every window of K versions — the same figures
// the dataflow rank printed live (when it did), and any other K after the fact.
//
// From the trace: the lead trainer's (lowest trainer rank's) `batch_wait` and `train_step`
// events give each iteration's wait and step; the dataflow rank's `publish` events (trainer
// group 0) date the versions; its `books` / `books_used` events carry the cumulative produced,
// entered, consumed and stale counts at each version; `eval` events give evaluation time; each
// rollout rank's `generate` events its production. Per-instance acceptance is not in the trace
// ("n/a").
#include "apps/balance_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "astraflow/core/error.hpp"
#include "astraflow/core/trace_kinds.hpp"
#include "astraflow/io/trace_report.hpp"
#include "astraflow/io/trace_writer.hpp"

namespace astraflow {

namespace {

struct Books {
  std::uint64_t produced = 0, entered = 0, consumed = 0, stale = 0;
};

// What the windows are cut from, by the version an iteration produced: the lead trainer's step
// and wait times, the first policy's publish times, the dataflow's cumulative books, the
// evaluation spans, and every rollout rank seen.
struct Series {
  std::map<std::int64_t, double> step_s, wait_s, published;
  std::map<std::int64_t, Books> books;
  std::vector<std::pair<double, double>> evals;
  std::set<int> rollout_ranks;
};

// The lowest trainer rank with train_step events: the lead whose iterations the windows count.
int leadTrainer(const std::vector<io::TraceEvent>& events) {
  int lead = -1;
  for (const auto& e : events) {
    if (e.role == "trainer" && traceKindOf(e.kind) == TraceKind::TrainStep && (lead < 0 || e.rank < lead))
      lead = e.rank;
  }
  if (lead < 0) throw Error("the trace has no trainer train_step events: nothing to report on");
  return lead;
}

Series collectSeries(const std::vector<io::TraceEvent>& events, int lead) {
  Series s;
  for (const auto& e : events) {
    if (e.role == "rollout") s.rollout_ranks.insert(e.rank);
    const auto kind = traceKindOf(e.kind);
    if (!kind) continue;
    if (e.rank == lead && kind == TraceKind::TrainStep) s.step_s[e.version] += e.t_end - e.t_start;
    if (e.rank == lead && kind == TraceKind::BatchWait) s.wait_s[e.version + 1] += e.t_end - e.t_start;
    if (e.role != "dataflow") continue;
    switch (*kind) {
      case TraceKind::Publish:
        if (e.policy == 0) s.published[e.version] = e.t_start;
        break;
      case TraceKind::Books:
        s.books[e.version].entered = e.count;
        s.books[e.version].produced = e.total;
        break;
      case TraceKind::BooksUsed:
        s.books[e.version].consumed = e.count;
        s.books[e.version].stale = e.total - e.count;
        break;
      case TraceKind::Eval: s.evals.emplace_back(e.t_start, e.t_end); break;
      default: break;
    }
  }
  if (s.books.empty()) {
    throw Error(
        "the trace has no dataflow 'books' events (runs recorded before the balance report have none); "
        "the production figures cannot be recomputed");
  }
  return s;
}

// The report of the window between published versions `first` and `v`, as the dataflow rank
// would have made it.
BalanceReport windowReport(const std::vector<io::TraceEvent>& events, Series& s, std::int64_t first, std::int64_t v,
                           const BalanceParams& params) {
  BalanceReport r;
  r.source = "trace";
  r.version_first = first;
  r.version_last = v;
  double wait = 0, step = 0;
  for (std::int64_t i = first + 1; i <= v; ++i) {
    if (!s.step_s.count(i)) continue;
    ++r.iterations;
    step += s.step_s[i];
    wait += s.wait_s.count(i) ? s.wait_s[i] : 0.0;
  }
  const double t0 = s.published[first], t1 = s.published[v];
  r.wall_s = t1 - t0;
  for (const auto& [a, b] : s.evals) r.eval_s += std::max(0.0, std::min(b, t1) - std::max(a, t0));
  r.training_s = step;
  r.avg_step_s = r.iterations ? (wait + step) / r.iterations : 0.0;
  r.avg_wait_s = r.iterations ? wait / r.iterations : 0.0;
  r.wait_fraction = wait + step > 0 ? wait / (wait + step) : 0.0;
  const Books a = s.books.count(first) ? s.books[first] : Books{}, b = s.books.count(v) ? s.books[v] : a;
  r.produced = b.produced - a.produced;
  r.accepted = b.entered - a.entered;
  r.consumed = b.consumed - a.consumed;
  r.stale = b.stale - a.stale;
  std::map<int, std::pair<std::uint64_t, std::int64_t>> per_rank;  // produced, newest version used
  for (int rank : s.rollout_ranks) per_rank[rank] = {0, -1};
  for (const auto& e : events) {
    if (e.role != "rollout" || traceKindOf(e.kind) != TraceKind::Generate || e.t_end <= t0 || e.t_end > t1) continue;
    auto& [produced, newest] = per_rank[e.rank];
    produced += e.count;
    newest = std::max(newest, e.version);
  }
  for (const auto& [rank, figures] : per_rank) {
    InstanceWindow i;
    i.uid = fmt::format("rank{}", rank);
    i.produced = figures.first;
    r.instances.push_back(i);
    if (figures.first > 0 && figures.second < v - 1) r.weight_transfer_active = true;
  }
  r.g = static_cast<int>(r.instances.size());
  classifyInstances(r.instances);
  decide(r, params);
  return r;
}

}  // namespace

std::vector<BalanceReport> replayBalance(const std::vector<io::TraceEvent>& events, const BalanceParams& params) {
  if (params.every <= 0) throw Error("--balance K: K must be at least 1");
  Series s = collectSeries(events, leadTrainer(events));
  std::vector<BalanceReport> out;
  const std::int64_t last_version = s.published.empty() ? 0 : s.published.rbegin()->first;
  for (std::int64_t v = params.every; v <= last_version; v += params.every) {
    const std::int64_t first = v - params.every;
    if (s.published.count(first) && s.published.count(v)) out.push_back(windowReport(events, s, first, v, params));
  }
  return out;
}

int balanceCommand(const std::string& run_or_trace, int every, const std::string& format) {
  std::string path = io::traceFileOf(run_or_trace);
  BalanceParams params;
  params.every = every;
  std::vector<BalanceReport> reports;
  try {
    auto run = io::readRunEvents(run_or_trace);  // a killed run: its per-rank files as they are
    path = run.source;
    reports = replayBalance(run.events, params);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s: %s\n", path.c_str(), e.what());
    return 2;
  }
  if (format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : reports) all.push_back(nlohmann::json::parse(balanceReportJson(r, params)));
    std::printf("%s\n", all.dump(2).c_str());
    return 0;
  }
  std::printf("balance reports of %s, every %d versions (tau_low %.2f, tau_high %.2f, rho %.2f)\n", path.c_str(), every,
              params.tau_low, params.tau_high, params.rho);
  for (const auto& r : reports) std::printf("\n%s\n", formatBalanceReport(r).c_str());
  if (reports.empty()) std::printf("(no complete window of %d versions)\n", every);
  return 0;
}

}  // namespace astraflow
