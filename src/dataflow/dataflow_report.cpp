// The dataflow rank's end-of-run report: the books over every policy, per-policy counters and
// weight-transfer figures, evaluation results, plug-in, site and elastic counters.
#include "dataflow/dataflow_rank.hpp"

namespace astraflow::dataflow_detail {

DataflowReport DataflowRank::report(std::int64_t version, std::uint64_t unsent) {
  DataflowReport r;
  r.versions = version;
  for (const auto& p : policies_) {
    const auto& c = p.assembler->counters();
    r.produced += c.produced;
    r.accepted += c.accepted();
    r.filtered += c.filtered;
    r.filtered_nonfinite += c.filtered_nonfinite;
    r.filtered_error += c.filtered_error;
    r.stale_dropped += c.stale_dropped;
    r.consumed += c.consumed;
    r.replayed += c.replayed;
    r.batches += c.batches;
    r.buffered += p.assembler->buffered();
    PolicyBooks b;
    b.name = p.name;
    b.versions = p.published;
    b.produced = c.produced;
    b.accepted = c.accepted();
    b.filtered = c.filtered;
    b.stale_dropped = c.stale_dropped;
    b.consumed = c.consumed;
    b.replayed = c.replayed;
    b.buffered = p.assembler->buffered();
    const auto& ws = w_.weight_stores[p.group]->stats();
    b.weights_deltas_logged = ws.deltas_logged;
    b.weights_deltas_skipped = ws.deltas_skipped;
    b.weights_delta_bytes_logged = ws.delta_bytes_logged;
    b.weights_changed_elements = ws.changed_elements;
    b.weights_compared_elements = ws.elements;
    r.policies.push_back(std::move(b));
  }
  r.malformed = malformed_;
  r.unroutable = unroutable_;
  r.tasks_unsent = unsent;
  r.eval_received = eval_.received();
  r.eval_rounds = eval_.rounds();
  r.eval_accuracy_start = eval_.startAccuracy();
  r.eval_accuracy_end = eval_.endAccuracy();
  r.eval_pass_at_k_end = eval_.endPassAtK();
  if (eval_.rounds() > 0 && eval_.endAccuracy() >= 0) {
    const EvalRoundResult& last = eval_.latestDone()->result;
    r.eval_version_end = last.version_high;
    for (const auto& s : last.sets) r.eval_sets.push_back({s.name, s.accuracy, s.pass_at_k, s.problems, s.samples});
  }
  r.eval_best_version = best_.version;
  r.eval_best_mean = best_.mean;
  r.wall_seconds = w_.now();
  r.segment_wall_seconds = w_.segmentSeconds();
  r.trajectories_written = trajectories_->rowsWritten();
  for (const auto& role : cfg_.workflow.roles) {
    r.roles.push_back(
        {role.name, eval_.roleReward(role.name, /*last=*/false), eval_.roleReward(role.name, /*last=*/true)});
  }
  r.plugins = pluginCounters();
  if (hub_) r.cross_site = hub_->figures();
  r.tasks_returned = server_pools_->tasksReturned();
  r.tasks_reissued = server_pools_->reissued();
  r.returned_duplicates = server_pools_->duplicates();
  r.rollout_ranks_lost = server_pools_->ranksLost();
  r.pools_lost = server_pools_->poolsLost();
  r.checkpoints_skipped = checkpoints_skipped_;
  r.checkpoints_pruned = checkpoints_pruned_;
  if (elastic_) {
    r.elastic = elastic_->figures();
    w_.spawned_reports = elastic_->childReports();
  }
  return r;
}

}  // namespace astraflow::dataflow_detail
