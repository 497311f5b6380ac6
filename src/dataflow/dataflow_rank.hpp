#pragma once
// The dataflow rank: its loop (dataflow_role.cpp: publish, ingest, route, serve, admit, hand out
// tasks, end the streams) over objects with one job each (Admission, BatchAssembler per policy,
// EvalScheduler, BalanceWindow, SiteHub, ElasticPools, the task sinks), and its bookkeeping
// (dataflow_rank_state.cpp: restore, progress lines, checkpoints, the plug-in inventory;
// dataflow_report.cpp: the end-of-run report). Private to src/dataflow.
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
#include <string_view>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/dataflow/balance.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/dataflow/dataflow_checkpoint.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/eval_table.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/tasks/environment.hpp"
#include "dataflow/admission.hpp"
#include "dataflow/balance_window.hpp"
#include "dataflow/elastic_pools.hpp"
#include "dataflow/eval_scheduler.hpp"
#include "dataflow/policy_state.hpp"
#include "dataflow/server_pools.hpp"
#include "dataflow/site_hub.hpp"
#include "dataflow/task_sink.hpp"

namespace astraflow::dataflow_detail {

class DataflowRank {
 public:
  explicit DataflowRank(RunWiring& w);
  DataflowReport run();

 private:
  bool progressAndPublish();
  bool ingest();
  void ingestRecord(std::span<const std::byte> record, const char* source, std::uint32_t pool_uid = 0);
  // A record from the ring of local pool `pool`, whose ranks generate on servers (ServerPools).
  void ingestServerRecord(std::span<const std::byte> record, std::size_t pool);
  void requeue(std::vector<Task> tasks);  // to the front of their policies' outboxes
  void requeueFront(Task t);
  PolicyState makePolicyState(const std::string& name, int group);
  void routeTeamThroughLead();  // one task given back: ahead of those not yet sent
  // A ring record as a trajectory; a malformed one is counted (and the first few shown).
  std::optional<Trajectory> decodeRecord(std::span<const std::byte> record, std::string_view source);
  void route(Trajectory t);
  void waitForSites();
  bool serve();
  bool flushOutbox();
  void startEval(std::int64_t min_version);
  // Evaluation set up (dataflow_eval.cpp): the sets' plan, the response text and reference
  // answers a round records, the evaluation table and the best round (run.keep_best).
  std::vector<EvalSetPlan> evalPlans() const;
  void setUpEvaluation();
  void evalRoundDone(const EvalRound& round);
  // The books at `version` (the run's last at its end; also left every run.flush_seconds while it
  // runs). dataflow_report.cpp
  DataflowReport report(std::int64_t version, std::uint64_t unsent);
  bool finished(PolicyState& p) const;
  void endStreams();
  void checkpoint(std::int64_t version);
  // Takes the checkpoint due once every policy has published it (dataflow_rank_state.cpp).
  void checkpointWhenAllReached();
  // The batches a policy still needs: served and not trained yet, or trained into a version past
  // the next checkpoint a slower policy has not reached (they go back into that checkpoint's buffer).
  void dropConfirmed(PolicyState& p);
  void restore();
  void progressLine(PolicyState& p);
  // Every plug-in instance with a stable key ("filter.0.zero_advantage@solver", …).
  std::vector<std::pair<std::string, Plugin*>> plugins();
  std::vector<PluginCount> pluginCounters();

  RunWiring& w_;
  const Config& cfg_;
  RoleContext ctx_;
  std::unique_ptr<Environment> env_;
  EvalScheduler eval_;                               // after env_: its plan asks the environment for its sets
  std::unique_ptr<io::EvalTableWriter> eval_table_;  // <run>/eval.h5 when the run evaluates
  std::unique_ptr<Tokenizer> eval_tokenizer_;        // decodes the answers the table records
  std::uint64_t eval_table_failures_ = 0;            // rounds the table could not take (logged once)
  struct BestRound {
    std::int64_t version = -1;
    double mean = -1;
    std::vector<EvalSetScore> sets;
  } best_;  // the evaluated version > 0 of the best mean accuracy (earliest on a tie)
  std::vector<PolicyState> policies_;
  std::unique_ptr<Admission> admission_;  // after policies_: it keeps a reference to them
  std::unique_ptr<io::TrajectoryWriter> trajectories_;
  std::size_t lead_ = 0;  // the policy whose outbox and pools carry tasks of a multi-agent team
  std::uint64_t malformed_ = 0, unroutable_ = 0, rollout_ended_ = 0;
  bool no_rollout_ = false;  // every pool of some policy is lost: the run ends as at its wall limit
  std::int64_t last_checkpoint_ = -1;
  std::uint64_t checkpoints_skipped_ = 0;  // for want of disk space (DataflowReport)
  std::uint64_t checkpoints_pruned_ = 0;   // run.keep_checkpoints
  void pruneCheckpoints();
  // The next checkpoint version (a multiple of run.checkpoint_every; -1: none). It is taken when
  // the slowest policy publishes it: each trainer checkpoints at its own pace, and a checkpoint
  // must hold every policy at the same version for a team's books to balance on resume.
  std::int64_t checkpoint_due_ = -1;
  std::vector<std::byte> record_;
  std::unique_ptr<Router> router_;
  std::vector<std::string> policy_names_;
  std::unique_ptr<ServerPools> server_pools_;          // the local pools that generate on servers
  std::vector<std::unique_ptr<TaskSink>> pool_sinks_;  // per local pool: its task ring (leased for server pools)
  std::unique_ptr<SiteHub> hub_;                       // cross_site.listen: remote sites' gateways
  std::unique_ptr<ElasticPools> elastic_;              // elastic.mode auto|external: spawned pools
  std::unique_ptr<BalanceWindow> balance_;             // after hub_ and elastic_, which it reads
};

}  // namespace astraflow::dataflow_detail
