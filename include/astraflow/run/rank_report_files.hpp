#pragma once
// Each rank's report left on disk, <run>/trace/rank_<r>.report: every run.flush_seconds while the
// rank runs (the roles call RoleContext::snapshot) and once more at its end. A rank that is killed
// keeps the figures of its last write, which `astraflow trace` reads for a run without a
// summary.json. The bytes are encodeRankReport's; each write replaces the file whole (written
// beside, then renamed), so a reader never sees half of one.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/core/rank_report.hpp"
#include "astraflow/io/flush_clock.hpp"

namespace astraflow {

std::filesystem::path rankReportPath(const std::filesystem::path& run_dir, int rank);

class PrivateMemoryPeak;

// Fills the process's measured figures into `report`: its peak resident set, its private peak
// (from `private_peak` when given) and its CPU seconds.
void measureProcess(RankReport& report, const PrivateMemoryPeak* private_peak = nullptr);

class RankReportFile final : public ReportSink {
 public:
  // `base`: the rank, its label and its memory plan; each write adds the figures and the
  // process's figures so far (measureProcess). seconds <= 0: written only at the end.
  RankReportFile(std::filesystem::path path, RankReport base, double seconds,
                 const PrivateMemoryPeak* private_peak = nullptr);
  bool due() const override { return clock_.due(); }
  void write(const RoleReport& figures) override;
  // The rank's final report, due or not.
  void writeFinal(const RankReport& report);

 private:
  void store(const RankReport& report);

  std::filesystem::path path_;
  RankReport base_;
  io::FlushClock clock_;
  const PrivateMemoryPeak* private_peak_ = nullptr;
  bool warned_ = false;  // a failed write is logged once, never thrown: the run goes on
};

struct StoredRankReport {
  std::string path;
  std::optional<RankReport> report;  // empty when the file cannot be read (error says why)
  std::string error;
  double age_seconds = 0;  // since it was last written
};

// Every rank_<r>.report under <run>/trace, in rank order.
std::vector<StoredRankReport> readRankReports(const std::filesystem::path& run_dir);

}  // namespace astraflow
