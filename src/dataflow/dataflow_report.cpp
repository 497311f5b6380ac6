// The dataflow rank's end-of-run report: the books over every policy, per-policy counters and
// weight-transfer figures, evaluation results, plug-in, site and elastic counters.
#include "dataflow/dataflow_rank.hpp"

namespace astraflow::dataflow_detail {

RankReport DataflowRank::finalReport(std::int64_t final_version, std::uint64_t unsent) {
  RankReport r;
  AssemblerCounters total;
  std::uint64_t buffered = 0;
  for (const auto& p : policies_) {
    const auto& c = p.assembler->counters();
    total.produced += c.produced;
    total.filtered += c.filtered;
    total.filtered_nonfinite += c.filtered_nonfinite;
    total.filtered_error += c.filtered_error;
    total.stale_dropped += c.stale_dropped;
    total.consumed += c.consumed;
    total.replayed += c.replayed;
    total.batches += c.batches;
    buffered += p.assembler->buffered();
  }
  r["versions"] = static_cast<double>(final_version);
  r["produced"] = static_cast<double>(total.produced);
  r["accepted"] = static_cast<double>(total.accepted());
  r["filtered"] = static_cast<double>(total.filtered);
  r["filtered_nonfinite"] = static_cast<double>(total.filtered_nonfinite);
  r["filtered_error"] = static_cast<double>(total.filtered_error);
  r["stale_dropped"] = static_cast<double>(total.stale_dropped);
  r["consumed"] = static_cast<double>(total.consumed);
  r["batches"] = static_cast<double>(total.batches);
  r["buffered"] = static_cast<double>(buffered);
  r["malformed"] = static_cast<double>(malformed_);
  r["unroutable"] = static_cast<double>(unroutable_);
  r["tasks_unsent"] = static_cast<double>(unsent);
  r["eval_received"] = static_cast<double>(eval_.received());
  r["eval_rounds"] = static_cast<double>(eval_.rounds());
  r["eval_accuracy_start"] = eval_.startAccuracy();
  r["eval_accuracy_end"] = eval_.endAccuracy();
  r["wall_seconds"] = w_.now();
  r["segment_wall_seconds"] = w_.segmentSeconds();
  r["trajectories_written"] = static_cast<double>(trajectories_->rowsWritten());
  r["replayed"] = static_cast<double>(total.replayed);
  for (const auto& p : policies_) {
    const auto& c = p.assembler->counters();
    const std::string k = "policy." + p.name + ".";
    r[k + "versions"] = static_cast<double>(p.published);
    r[k + "produced"] = static_cast<double>(c.produced);
    r[k + "accepted"] = static_cast<double>(c.accepted());
    r[k + "filtered"] = static_cast<double>(c.filtered);
    r[k + "stale_dropped"] = static_cast<double>(c.stale_dropped);
    r[k + "consumed"] = static_cast<double>(c.consumed);
    r[k + "replayed"] = static_cast<double>(c.replayed);
    r[k + "buffered"] = static_cast<double>(p.assembler->buffered());
    const auto& ws = w_.weight_stores[p.group]->stats();
    r[k + "weights_deltas_logged"] = static_cast<double>(ws.deltas_logged);
    r[k + "weights_deltas_skipped"] = static_cast<double>(ws.deltas_skipped);
    r[k + "weights_delta_bytes_logged"] = static_cast<double>(ws.delta_bytes_logged);
    r[k + "weights_changed_elements"] = static_cast<double>(ws.changed_elements);
    r[k + "weights_compared_elements"] = static_cast<double>(ws.elements);
  }
  for (const auto& role : cfg_.workflow.roles) {
    r[fmt::format("role.{}.eval_reward_start", role.name)] = eval_.roleReward(role.name, /*last=*/false);
    r[fmt::format("role.{}.eval_reward_end", role.name)] = eval_.roleReward(role.name, /*last=*/true);
  }
  for (const auto& [key, value] : pluginCounters()) r[key] = value;
  if (hub_) hub_->report(r);
  if (elastic_) {
    elastic_->report(r);
    w_.spawned_reports = elastic_->childReports();
  }
  return r;
}

}  // namespace astraflow::dataflow_detail
