// initLogging: one spdlog stderr logger per rank with a "[rank r role]" prefix on every line, at
// the config's level.
#include "astraflow/core/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "astraflow/core/config.hpp"

namespace astraflow {

spdlog::level::level_enum spdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

void initLogging(int rank, const std::string& role_label, LogLevel level) {
  auto logger = spdlog::stderr_logger_mt(fmt::format("rank{}", rank));
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [rank {} {}] %^%l%$: %v", rank, role_label));
  logger->set_level(spdlogLevel(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace astraflow
