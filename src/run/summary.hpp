#pragma once
// summary.json: the run's totals, per-policy and per-site figures, and every rank's report under
// "ranks" (the key names the tests, scripts and docs/analysis.md read), built from the typed
// rank reports the reporting rank gathered.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/rank_report.hpp"

namespace astraflow::run_detail {

// One rank's report as its "ranks" entry: rank, role, label and the fields by name; a list's
// fields named by the element type's kJsonKey ("weight_pulls.solver", "policy.solver.produced").
nlohmann::json rankReportJson(const RankReport& report);

// The home run's summary (a dataflow rank among `ranks`).
nlohmann::json summarize(const Config& cfg, const std::vector<RankReport>& ranks, std::int64_t resumed_from);

// run.keep_best: links (or copies) the trainer files of the summary's eval_best_version to
// checkpoints/best.<policy>.h5 and writes checkpoints/best.json; what it kept (null: nothing).
// keep_best.cpp
nlohmann::json keepBestCheckpoint(const Config& cfg, const std::filesystem::path& run_dir,
                                  const nlohmann::json& summary);

// A gateway site's summary: its link home and what its pool did.
nlohmann::json summarizeSite(const Config& cfg, const std::vector<RankReport>& ranks);

}  // namespace astraflow::run_detail
