// `astraflow trace --format json`: the same figures as the text tables (io::computeTraceReport),
// as one JSON document for scripts, with the run's summary.json embedded when it is there.
#include "apps/trace_command.hpp"

#include <nlohmann/json.hpp>

#include <fstream>

#include "apps/report_figures.hpp"
#include "astraflow/io/trace_report.hpp"

namespace astraflow {

namespace {

nlohmann::json optionalVersion(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

// Each rank's last report of a killed run (run/rank_report_files.hpp), its scalar figures.
nlohmann::json rankReportsJson(const std::vector<StoredRankReport>& rank_reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rank_reports) {
    if (!r.report) {
      out.push_back({{"path", r.path}, {"error", r.error}});
      continue;
    }
    nlohmann::json figures = nlohmann::json::object();
    for (const auto& [name, value] : scalarFigures(r.report->figures)) figures[name] = value;
    out.push_back({{"path", r.path},
                   {"rank", r.report->rank},
                   {"label", r.report->label},
                   {"role", r.report->roleName()},
                   {"age_seconds", r.age_seconds},
                   {"peak_rss_bytes", r.report->peak_rss_bytes},
                   {"cpu_seconds", r.report->cpu_seconds},
                   {"startup_cpu_seconds", r.report->startup_cpu_seconds},
                   {"memory_plan_bytes", r.report->memory_plan_bytes},
                   {"peak_private_bytes", r.report->peak_private_bytes},
                   {"memory_plan_private_bytes", r.report->memory_plan_private_bytes},
                   {"figures", std::move(figures)}});
  }
  return out;
}

}  // namespace

std::string traceReportJson(const io::TraceReport& report, const std::string& trace_path,
                            const std::string& summary_path, const std::vector<io::RankTraceFile>& rank_files,
                            const std::vector<StoredRankReport>& rank_reports) {
  nlohmann::json j;
  j["trace"] = trace_path;
  j["events"] = report.events;
  j["t_first"] = report.t_first;
  j["t_last"] = report.t_last;
  j["wall_s"] = report.wall_s;
  j["trainers"] = nlohmann::json::array();
  for (const auto& t : report.trainers) {
    j["trainers"].push_back({{"rank", t.rank},
                             {"steps", t.steps},
                             {"total_step_s", t.total_step_s},
                             {"mean_step_s", t.mean_step_s},
                             {"max_step_s", t.max_step_s},
                             {"batch_waits", t.batch_waits},
                             {"total_wait_s", t.total_wait_s},
                             {"mean_wait_s", t.mean_wait_s},
                             {"wait_fraction", t.wait_fraction},
                             {"trajectories", t.trajectories},
                             {"tokens", t.tokens},
                             {"weight_stages", t.weight_stages},
                             {"checkpoints", t.checkpoints},
                             {"first_version", optionalVersion(t.first_version)},
                             {"last_version", optionalVersion(t.last_version)}});
  }
  j["rollouts"] = nlohmann::json::array();
  for (const auto& r : report.rollouts) {
    j["rollouts"].push_back({{"rank", r.rank},
                             {"batches", r.batches},
                             {"trajectories", r.trajectories},
                             {"tokens", r.tokens},
                             {"busy_s", r.busy_s},
                             {"span_s", r.span_s},
                             {"trajectories_per_span_s", r.trajectories_per_span_s},
                             {"tokens_per_span_s", r.tokens_per_span_s},
                             {"trajectories_per_busy_s", r.trajectories_per_busy_s},
                             {"tokens_per_busy_s", r.tokens_per_busy_s},
                             {"weight_pulls", r.weight_pulls},
                             {"pull_bytes", r.pull_bytes},
                             {"mean_pull_s", r.mean_pull_s},
                             {"task_wait_s", r.task_wait_s}});
  }
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [s, n] : report.staleness.trajectories_by_staleness) by[std::to_string(s)] = n;
  j["staleness"] = {{"trajectories_by_staleness", by},
                    {"trajectories", report.staleness.trajectories},
                    {"mean", report.staleness.mean},
                    {"max", optionalVersion(report.staleness.max)}};
  const auto& d = report.dataflow;
  j["dataflow"] = {{"versions_published", d.versions_published},
                   {"publish_bytes", d.publish_bytes},
                   {"last_published_version", optionalVersion(d.last_published_version)},
                   {"batches_served", d.batches_served},
                   {"trajectories_served", d.trajectories_served},
                   {"bytes_served", d.bytes_served},
                   {"stale_dropped", d.stale_dropped},
                   {"checkpoints", d.checkpoints}};
  j["rank_files"] = nlohmann::json::array();
  for (const auto& f : rank_files) {
    j["rank_files"].push_back({{"path", f.path},
                               {"events", f.events},
                               {"clean_end", f.clean_end},
                               {"error", f.error.empty() ? nlohmann::json() : nlohmann::json(f.error)}});
  }
  j["rank_reports"] = rankReportsJson(rank_reports);
  j["summary"] = nullptr;
  if (!summary_path.empty()) {
    std::ifstream in(summary_path);
    j["summary"] = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j["summary"].is_discarded()) j["summary"] = nullptr;
  }
  return j.dump(2);
}

}  // namespace astraflow
