// Reads environment.openenv.demonstrations (openenv_demonstrations.hpp): the JSONL rows of
// reset seeds and the turns a good player takes in those games.
#include "tasks/openenv_demonstrations.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "astraflow/core/error.hpp"
#include "tasks/jsonl_reader.hpp"
#include "tasks/process_registry.hpp"

namespace astraflow::detail {
namespace {

using json = nlohmann::ordered_json;

// "" when the row was taken into `d`, else why not.
std::string takeDemonstration(const json& row, std::uint64_t eval_seed_start, OpenEnvDemonstrations& d) {
  if (!row.is_object()) return "not a JSON object";
  const auto seed = row.find("seed");
  if (seed == row.end() || !seed->is_number_unsigned()) return "no \"seed\" (a whole number ≥ 0)";
  const std::uint64_t s = seed->get<std::uint64_t>();
  if (s >= eval_seed_start)
    return fmt::format("seed {} is held out (environment.openenv.eval_seed_start is {})", s, eval_seed_start);
  const auto actions = row.find("actions");
  if (actions == row.end() || !actions->is_array() || actions->empty()) return "no \"actions\" (a list of turns)";
  std::vector<std::string> turns;
  for (const auto& a : *actions) {
    if (!a.is_string()) return "an action that is not a string";
    turns.push_back(a.get<std::string>());
  }
  if (!d.actions.emplace(s, std::move(turns)).second) return fmt::format("seed {} given again", s);
  return "";
}

OpenEnvDemonstrations loadDemonstrations(const std::string& file, std::uint64_t eval_seed_start) {
  OpenEnvDemonstrations d;
  DatasetReport report;
  readJsonLines(file, "environment.openenv.demonstrations", report,
                [&](const json& row, std::size_t) { return takeDemonstration(row, eval_seed_start, d); });
  const std::string first = report.first_issues.empty()
                                ? std::string()
                                : fmt::format("; first: {}:{}: {}", report.first_issues[0].file,
                                              report.first_issues[0].line, report.first_issues[0].what);
  if (d.actions.empty())
    throw Error(fmt::format("environment.openenv.demonstrations {}: no usable row ({} lines, {} bad{})", file,
                            report.lines, report.bad, first));
  if (report.bad > 0)
    spdlog::warn("environment.openenv.demonstrations {}: {} of {} lines skipped{}", file, report.bad, report.lines,
                 first);
  for (const auto& [seed, turns] : d.actions) d.seeds.push_back(seed);
  return d;
}

}  // namespace

std::shared_ptr<const OpenEnvDemonstrations> sharedDemonstrations(const std::string& file,
                                                                  std::uint64_t eval_seed_start) {
  static ProcessRegistry<std::pair<std::string, std::uint64_t>, const OpenEnvDemonstrations> loaded;
  return loaded.get({file, eval_seed_start}, [&] {
    return std::make_shared<const OpenEnvDemonstrations>(loadDemonstrations(file, eval_seed_start));
  });
}

}  // namespace astraflow::detail
