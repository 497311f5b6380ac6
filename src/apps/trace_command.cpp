// `astraflow trace`: the figures come from io::computeTraceReport; this file only lays them
// out as aligned plain-text tables, one per role.
#include "apps/trace_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/report_figures.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/io/trace_report.hpp"
#include "astraflow/run/rank_report_files.hpp"

namespace astraflow {
namespace {

// Columns sized to their widest cell; the first column (a rank or a name) is left-aligned,
// the rest (figures) right-aligned so that digits line up.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

  void addRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

  void print(std::FILE* out) const {
    std::vector<std::size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()), 0);
      for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    for (const auto& row : rows_) {
      std::string line = "  ";
      for (std::size_t c = 0; c < row.size(); ++c) {
        if (c > 0) line += "  ";
        line += c == 0 ? fmt::format("{:<{}}", row[c], widths[c]) : fmt::format("{:>{}}", row[c], widths[c]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::fprintf(out, "%s\n", line.c_str());
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string seconds(double s) { return fmt::format("{:.3f}", s); }
std::string rate(double r) { return fmt::format("{:.1f}", r); }

// Binary units, as weight and record sizes are usually read.
std::string bytesText(std::uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string versionText(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "-"; }

void printNone() { std::printf("  (no events)\n"); }

void printTrainers(const io::TraceReport& report) {
  std::printf("\ntrainer\n");
  if (report.trainers.empty()) return printNone();
  TextTable table({"rank", "steps", "mean step s", "max step s", "waits", "mean wait s", "wait frac", "versions",
                   "trajectories", "tokens"});
  for (const auto& t : report.trainers) {
    table.addRow({std::to_string(t.rank), std::to_string(t.steps), seconds(t.mean_step_s), seconds(t.max_step_s),
                  std::to_string(t.batch_waits), seconds(t.mean_wait_s), fmt::format("{:.3f}", t.wait_fraction),
                  versionText(t.first_version) + ".." + versionText(t.last_version), std::to_string(t.trajectories),
                  std::to_string(t.tokens)});
  }
  table.print(stdout);
}

void printRollouts(const io::TraceReport& report) {
  std::printf("\nrollout (rates per second of active span / of generate time)\n");
  if (report.rollouts.empty()) return printNone();
  TextTable table({"rank", "batches", "trajectories", "tokens", "busy s", "span s", "traj/s span", "tok/s span",
                   "traj/s busy", "tok/s busy", "pulls", "pulled", "mean pull s"});
  for (const auto& r : report.rollouts) {
    table.addRow({std::to_string(r.rank), std::to_string(r.batches), std::to_string(r.trajectories),
                  std::to_string(r.tokens), seconds(r.busy_s), seconds(r.span_s), rate(r.trajectories_per_span_s),
                  rate(r.tokens_per_span_s), rate(r.trajectories_per_busy_s), rate(r.tokens_per_busy_s),
                  std::to_string(r.weight_pulls), bytesText(r.pull_bytes), seconds(r.mean_pull_s)});
  }
  table.print(stdout);
}

void printStaleness(const io::TraceReport& report) {
  const auto& h = report.staleness;
  std::printf("\nstaleness of consumed trajectories (trainer version - producing version)\n");
  if (h.trajectories == 0) return printNone();
  TextTable table({"staleness", "trajectories", "share"});
  for (const auto& [s, n] : h.trajectories_by_staleness) {
    const double share = 100.0 * static_cast<double>(n) / static_cast<double>(h.trajectories);
    table.addRow({std::to_string(s), std::to_string(n), fmt::format("{:.1f}%", share)});
  }
  table.addRow({"total", std::to_string(h.trajectories), "100.0%"});
  table.print(stdout);
  std::printf("  mean %.3f, max %s\n", h.mean, versionText(h.max).c_str());
}

void printDataflow(const io::TraceReport& report) {
  const auto& d = report.dataflow;
  std::printf("\ndataflow\n");
  TextTable table({"figure", "value"});
  table.addRow({"versions published", std::to_string(d.versions_published)});
  table.addRow({"last published version", versionText(d.last_published_version)});
  table.addRow({"published", bytesText(d.publish_bytes)});
  table.addRow({"batches served", std::to_string(d.batches_served)});
  table.addRow({"trajectories served", std::to_string(d.trajectories_served)});
  table.addRow({"served", bytesText(d.bytes_served)});
  table.addRow({"stale dropped", std::to_string(d.stale_dropped)});
  table.addRow({"checkpoints", std::to_string(d.checkpoints)});
  table.print(stdout);
}

void printSummary(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries) {
  std::printf("\nsummary (%s)\n", path.c_str());
  TextTable table({"key", "value"});
  for (const auto& [key, value] : entries) {
    // Nested values (the per-rank reports) stay in the file: the tables above show them per role.
    if (!value.empty() && (value.front() == '[' || value.front() == '{')) {
      table.addRow({key, "(nested; see the file)"});
    } else {
      table.addRow({key, value});
    }
  }
  table.print(stdout);
}

// A run that was never merged: which ranks ended cleanly, up to which flush the others got.
void printRankFiles(const std::vector<io::RankTraceFile>& files) {
  std::size_t clean = 0;
  for (const auto& f : files) clean += f.clean_end ? 1 : 0;
  std::printf("\nno trace.h5 (the run was killed, or is still going): read rank by rank; %zu of %zu ended cleanly\n",
              clean, files.size());
  TextTable table({"file", "events", "ended"});
  for (const auto& f : files) {
    const auto name = std::filesystem::path(f.path).filename().string();
    table.addRow({name, f.error.empty() ? std::to_string(f.events) : "-",
                  !f.error.empty() ? "unreadable: " + f.error
                  : f.clean_end    ? "cleanly"
                                   : "no (events to its last flush)"});
  }
  table.print(stdout);
}

// Each rank's report as its last write left it (every run.flush_seconds, and at its end): the
// figures a killed run's summary.json would have held. Zero figures are left out.
void printRankReports(const std::vector<StoredRankReport>& reports) {
  if (reports.empty()) return;
  std::printf("\neach rank's last report (trace/rank_<r>.report; zero figures left out)\n");
  for (const auto& r : reports) {
    if (!r.report) {
      std::printf("  %s: unreadable: %s\n", std::filesystem::path(r.path).filename().string().c_str(), r.error.c_str());
      continue;
    }
    std::printf("  rank %d %s, written %.0f s ago:\n", r.report->rank, r.report->label.c_str(), r.age_seconds);
    std::vector<std::string> items{
        fmt::format("peak_rss_mib={:.0f}", static_cast<double>(r.report->peak_rss_bytes) / (1 << 20)),
        fmt::format("peak_private_mib={:.0f}", static_cast<double>(r.report->peak_private_bytes) / (1 << 20)),
        fmt::format("cpu_seconds={:.1f}", r.report->cpu_seconds)};
    for (const auto& [name, value] : scalarFigures(r.report->figures)) {
      if (value == 0 || value == false) continue;
      items.push_back(name + "=" +
                      (value.is_number_float() ? fmt::format("{:.4g}", value.get<double>()) : value.dump()));
    }
    std::string line = "   ";
    for (const auto& item : items) {  // wrapped at ~100 columns
      if (line.size() + item.size() + 1 > 100 && line.size() > 3) {
        std::printf("%s\n", line.c_str());
        line = "   ";
      }
      line += " " + item;
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int traceCommand(const std::string& run_or_trace, const std::string& format) {
  io::RunTrace run;
  try {
    run = io::loadRunTrace(run_or_trace);
  } catch (const std::exception& e) {  // astraflow::Error by contract; anything else alike
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
  const io::TraceReport& report = run.report;
  const std::string& trace_path = run.source;
  const bool per_rank = !run.rank_files.empty();

  // A missing summary is normal (a run still going, or one that crashed); a broken one is
  // reported but does not hide the trace's tables.
  const auto run_dir = std::filesystem::path(trace_path).parent_path();
  const std::string summary_path = (run_dir / "summary.json").string();
  std::optional<std::vector<std::pair<std::string, std::string>>> summary;
  std::error_code ec;
  if (std::filesystem::exists(summary_path, ec)) {
    try {
      summary = io::readRunSummary(summary_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "astraflow: warning: summary skipped: %s\n", e.what());
    }
  }

  // A killed run's figures: each rank's last report (a finished run's are in summary.json).
  const std::vector<StoredRankReport> rank_reports =
      per_rank ? readRankReports(run_dir) : std::vector<StoredRankReport>{};
  if (format == "json") {
    std::printf("%s\n", traceReportJson(report, trace_path, summary ? summary_path : std::string(), run.rank_files,
                                        rank_reports)
                            .c_str());
    return 0;
  }
  std::printf("trace %s: %zu events, wall %.3f s (%.3f .. %.3f)\n", trace_path.c_str(), report.events, report.wall_s,
              report.t_first, report.t_last);
  if (per_rank) printRankFiles(run.rank_files);
  printRankReports(rank_reports);
  printTrainers(report);
  printRollouts(report);
  printStaleness(report);
  printDataflow(report);
  if (summary) printSummary(summary_path, *summary);
  return 0;
}

}  // namespace astraflow
