#pragma once
// elastic.mode external (docs/elastic.md): the maintainer command gets the balance report's JSON
// path as its last argument and answers a target pool size on the last line of its stdout; or a
// target file holds one. Anything else — a failing or hanging command, a garbage answer, a size
// outside [g_min, g_max] — leaves the pool as it is, with the reason in `why`. Private to
// src/dataflow.
#include <optional>
#include <string>

#include "astraflow/core/config.hpp"

namespace astraflow::dataflow_detail {

std::optional<int> askMaintainer(const ElasticSection& e, const std::string& report_path, std::string& why);
std::optional<int> readTargetFile(const ElasticSection& e, const std::string& path, std::string& why);

}  // namespace astraflow::dataflow_detail
