// RankReportFile and readRankReports (rank_report_files.hpp): each rank's figures on disk while
// it runs.
#include "astraflow/run/rank_report_files.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <span>
#include <system_error>
#include <utility>

#include <sys/resource.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "astraflow/core/error.hpp"
#include "astraflow/run/memory_plan.hpp"
#include "astraflow/run/private_memory_peak.hpp"

namespace astraflow {

namespace fs = std::filesystem;

fs::path rankReportPath(const fs::path& run_dir, int rank) {
  return run_dir / "trace" / fmt::format("rank_{}.report", rank);
}

void measureProcess(RankReport& report, const PrivateMemoryPeak* private_peak) {
  report.peak_rss_bytes = peakResidentBytes();
  if (private_peak != nullptr) report.peak_private_bytes = private_peak->peakBytes();
  if (rusage usage{}; getrusage(RUSAGE_SELF, &usage) == 0) {
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    report.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
}

RankReportFile::RankReportFile(fs::path path, RankReport base, double seconds, const PrivateMemoryPeak* private_peak)
    : path_(std::move(path)), base_(std::move(base)), clock_(seconds), private_peak_(private_peak) {}

void RankReportFile::write(const RoleReport& figures) {
  base_.figures = figures;
  measureProcess(base_, private_peak_);
  store(base_);
}

void RankReportFile::writeFinal(const RankReport& report) { store(report); }

void RankReportFile::store(const RankReport& report) {
  clock_.flushed();
  const auto bytes = encodeRankReport(report);
  const fs::path tmp = path_.string() + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(tmp, path_, ec);
  if (ec && !warned_) {
    warned_ = true;
    spdlog::warn("rank report {} not written ({}); the run goes on, its figures come at the end", path_.string(),
                 ec.message());
  }
}

std::vector<StoredRankReport> readRankReports(const fs::path& run_dir) {
  std::vector<std::pair<long, fs::path>> paths;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "trace", ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || entry.path().extension() != ".report") continue;
    try {
      paths.emplace_back(std::stol(name.substr(5)), entry.path());
    } catch (const std::exception&) {
      continue;  // not one of ours
    }
  }
  std::sort(paths.begin(), paths.end());
  std::vector<StoredRankReport> out;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& [rank, path] : paths) {
    StoredRankReport r;
    r.path = path.string();
    const auto written = fs::last_write_time(path, ec);
    if (!ec) r.age_seconds = std::chrono::duration<double>(now - written).count();
    try {
      std::ifstream in(path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) throw Error("cannot read the file");
      r.report = decodeRankReport(std::as_bytes(std::span(text.data(), text.size())));
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace astraflow
