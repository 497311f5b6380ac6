#pragma once
// Logging: spdlog to stderr with a "[rank r role]" prefix on every line.
#include <spdlog/spdlog.h>

#include <string>

namespace astraflow {

// level: trace|debug|info|warn|error (validated by the config parser / CLI).
void initLogging(int rank, const std::string& role_label, const std::string& level);
spdlog::level::level_enum parseLogLevel(const std::string& level);

}  // namespace astraflow
