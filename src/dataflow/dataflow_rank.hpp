#pragma once
// The dataflow rank's state and loop steps, shared by dataflow_role.cpp (the loop: publish,
// ingest, serve, admit, end the streams) and dataflow_rank_state.cpp (prompt source, progress
// lines, checkpoints and plug-in bookkeeping). Private to src/dataflow.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/dataflow/balance.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/dataflow/dataflow_checkpoint.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/tasks/environment.hpp"
#include "dataflow/elastic_pools.hpp"
#include "dataflow/eval_scheduler.hpp"
#include "dataflow/site_hub.hpp"
#include "dataflow/task_sink.hpp"

namespace astraflow::dataflow_detail {

struct PolicyState {
  std::string name;
  int group = 0;  // index in trainerGroups()
  std::unique_ptr<BatchAssembler> assembler;
  std::vector<int> pools;  // pools serving the policy
  std::size_t next_pool = 0;
  std::int64_t published = -1;    // newest published version
  std::int64_t next_batch = 0;    // batch i is built for trainer version i
  std::int64_t target = 0;        // last version of the run (run.versions, or where a wall-time stop fell)
  std::deque<Batch> unconfirmed;  // served, not yet trained (id >= published)
  std::optional<std::vector<std::byte>> pending_batch;  // encoded, waiting for ring space
  std::int64_t in_flight = 0;                           // training tasks admitted, trajectories not yet received
  std::deque<Task> outbox;                              // admitted tasks waiting for task-ring space
  // Progress between two progress lines.
  double reward_sum = 0;
  std::uint64_t reward_count = 0;
  std::vector<double> served_at, published_at;  // per version (dataflow-side wait estimate)
  std::vector<TrainerClock> trainer_clock;      // per version: the trainer's cumulative wait/step when staged
};

// One rollout instance's figures in the current balance window (a rank, or a remote site).
struct InstanceTally {
  std::uint64_t produced = 0, entered = 0;
  std::int64_t newest_version = -1;  // newest weights its trajectories used
};

// Run totals over every policy, for balance-report windows.
struct BookTotals {
  std::uint64_t produced = 0, entered = 0, consumed = 0, stale = 0;
};

// Policies admitted together: tasks go through the carrier's outbox and pools, and each task
// yields one trajectory for every member. Alone, a policy is its own unit; a multi-agent team
// is one unit carried by its first role's policy.
struct AdmissionUnit {
  std::size_t carrier = 0;
  std::vector<std::size_t> members;
};

class DataflowRank {
 public:
  explicit DataflowRank(RunWiring& w);
  DataflowReport run();

 private:
  bool progressAndPublish();
  bool ingest();
  void ingestRecord(std::span<const std::byte> record, const char* source, std::uint32_t pool_uid = 0);
  void route(Trajectory t);
  void waitForSites();
  bool serve();
  bool admit();
  bool admitUnit(const AdmissionUnit& unit);
  bool flushOutbox();
  void startEval(std::int64_t min_version);
  DataflowReport finalReport(std::int64_t final_version, std::uint64_t unsent);  // dataflow_report.cpp
  bool finished(PolicyState& p) const;
  void endStreams();
  void drainUntilRolloutEnds();
  void checkpoint(std::int64_t version);
  void restore();
  void progressLine(PolicyState& p);
  // Balance report (dataflow_balance.cpp): the window's figures, the three-zone decision, the
  // log text and <run>/balance/report_<v>.json.
  void balanceReport(const PolicyState& lead, std::int64_t v);
  BookTotals bookTotals() const;
  void recordBooks(std::int64_t v);
  std::int64_t instanceKey(const Trajectory& t) const;
  std::string instanceName(std::int64_t key) const;
  int instanceRanks(std::int64_t key) const;
  void actOnTarget(const BalanceReport& r, const std::string& report_path);
  // Every plug-in instance with a stable key ("filter.0.zero_advantage@solver", …).
  std::vector<std::pair<std::string, Plugin*>> plugins();
  std::vector<PluginCount> pluginCounters();
  Task makeTask(const std::string& policy, std::uint64_t problem, std::uint64_t group, std::uint32_t index);
  std::uint64_t nextProblem();
  bool nextAdmittedProblem(std::int64_t version, std::uint64_t& problem);
  PromptInfo promptInfo(std::uint64_t problem, std::int64_t version);

  RunWiring& w_;
  const Config& cfg_;
  RoleContext ctx_;
  EvalScheduler eval_;
  std::unique_ptr<Environment> env_;
  std::vector<PolicyState> policies_;
  std::unique_ptr<io::TrajectoryWriter> trajectories_;
  std::size_t lead_ = 0;  // the policy whose outbox and pools carry tasks of a multi-agent team
  std::vector<AdmissionUnit> units_;
  std::uint64_t next_problem_ = 0, next_task_id_ = 0, next_group_id_ = 0;
  std::uint64_t malformed_ = 0, unroutable_ = 0, rollout_ended_ = 0;
  bool stop_admitting_ = false;
  std::int64_t last_checkpoint_ = -1;
  std::vector<std::byte> record_;
  std::vector<std::unique_ptr<Curator>> curators_;
  std::unique_ptr<Router> router_;
  std::vector<std::string> policy_names_;
  std::vector<std::uint64_t> prompt_order_;  // this epoch's order of the prompt pool
  std::uint64_t prompt_epoch_ = ~std::uint64_t{0};
  std::mt19937_64 curator_rng_;
  std::vector<std::unique_ptr<RingSink>> pool_sinks_;  // per local pool: its task ring
  std::unique_ptr<SiteHub> hub_;                       // cross_site.listen: remote sites' gateways
  std::unique_ptr<ElasticPools> elastic_;              // elastic.mode auto|external: spawned pools
  int spawn_failures_in_row_ = 0;
  double spawn_retry_at_ = 0;
  std::map<std::int64_t, InstanceTally> instances_;  // this balance window, by instanceKey
  BookTotals report_base_;                           // totals at the previous report
};

}  // namespace astraflow::dataflow_detail
