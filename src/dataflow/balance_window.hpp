#pragma once
// The balance report's window (docs/elastic.md, paper A.4): each rollout instance's production
// since the last report, the run's books at it, and every elastic.every lead versions the
// report itself — the trainer's wait fraction, production against consumption, the three-zone
// decision, the per-instance table in the log and in <run>/balance/report_<V>.json — and what
// acts on its target (spawn or retire pools; elastic.mode). Private to src/dataflow.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "astraflow/core/records.hpp"
#include "astraflow/dataflow/balance.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "dataflow/elastic_pools.hpp"
#include "dataflow/eval_scheduler.hpp"
#include "dataflow/policy_state.hpp"
#include "dataflow/site_hub.hpp"

namespace astraflow::dataflow_detail {

// Run totals over every policy, for balance-report windows.
struct BookTotals {
  std::uint64_t produced = 0, entered = 0, consumed = 0, stale = 0;
};

// One rollout instance's figures in the current window (a rank, a spawned pool, a remote site).
struct InstanceTally {
  std::uint64_t produced = 0, entered = 0;
  std::int64_t newest_version = -1;  // newest weights its trajectories used
};

class BalanceWindow {
 public:
  // `hub` and `elastic` may be null (no remote sites, no spawned pools).
  BalanceWindow(RunWiring& w, const std::vector<PolicyState>& policies, const EvalScheduler& eval, const SiteHub* hub,
                ElasticPools* elastic);

  // The first window starts from the books as they are now (a resumed run's restored ones).
  void start();
  void produced(const Trajectory& t);  // a training trajectory arrived
  void entered(const Trajectory& t);   // … and entered its policy's buffer
  // The cumulative books at lead version v, as trace events (`astraflow trace --balance`).
  void recordBooks(std::int64_t v);
  // The report at lead version v, and the elastic action on its target; starts the next window.
  void report(const PolicyState& lead, std::int64_t v);

 private:
  BookTotals bookTotals() const;
  void timeWindow(const PolicyState& lead, BalanceReport& r) const;
  int collectInstances(BalanceReport& r);
  std::int64_t instanceKey(const Trajectory& t) const;
  std::string instanceName(std::int64_t key) const;
  int instanceRanks(std::int64_t key) const;
  void actOnTarget(const BalanceReport& r, const std::string& report_path);

  RunWiring& w_;
  const Config& cfg_;
  const std::vector<PolicyState>& policies_;
  const EvalScheduler& eval_;
  const SiteHub* hub_;
  ElasticPools* elastic_;
  std::map<std::int64_t, InstanceTally> instances_;  // this window, by instanceKey
  BookTotals report_base_;                           // totals at the previous report
  int spawn_failures_in_row_ = 0;
  double spawn_retry_at_ = 0;
};

}  // namespace astraflow::dataflow_detail
