#pragma once
// Logging: spdlog to stderr with a "[rank r role]" prefix on every line.
#include <spdlog/spdlog.h>

#include <string>

namespace astraflow {

enum class LogLevel;  // core/config.hpp (run.log_level)

void initLogging(int rank, const std::string& role_label, LogLevel level);
spdlog::level::level_enum spdlogLevel(LogLevel level);

}  // namespace astraflow
