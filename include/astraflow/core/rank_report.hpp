#pragma once
// Figures one rank reports at the end of a run (gathered into summary.json under "ranks").
#include <map>
#include <string>

namespace astraflow {

using RankReport = std::map<std::string, double>;

}  // namespace astraflow
