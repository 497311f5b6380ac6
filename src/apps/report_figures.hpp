#pragma once
// The scalar figures of a role's report, in its fields() order: what `astraflow trace` shows of
// each rank's last report for a run that was killed (run/rank_report_files.hpp). Lists and
// nested records (per-policy books, sites) are left to summary.json.
#include <nlohmann/json.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "astraflow/core/rank_report.hpp"

namespace astraflow {

inline std::vector<std::pair<std::string, nlohmann::json>> scalarFigures(const RoleReport& figures) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  std::visit(
      [&](const auto& report) {
        using Report = std::decay_t<decltype(report)>;
        Report::fields(report, [&](const char* name, const auto& value) {
          using Value = std::decay_t<decltype(value)>;
          if constexpr (std::is_arithmetic_v<Value>) out.emplace_back(name, nlohmann::json(value));
        });
      },
      figures);
  return out;
}

}  // namespace astraflow
