// initLogging: one spdlog stderr logger per rank with a "[rank r role]" prefix on every line; parseLogLevel maps the
// config's level names.
#include "astraflow/core/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace astraflow {

spdlog::level::level_enum parseLogLevel(const std::string& level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  return spdlog::level::info;
}

void initLogging(int rank, const std::string& role_label, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(fmt::format("rank{}", rank));
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [rank {} {}] %^%l%$: %v", rank, role_label));
  logger->set_level(parseLogLevel(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace astraflow
