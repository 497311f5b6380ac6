// run.memory_check at the start of a run (memory_check.hpp).
#include "run/memory_check.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"

namespace astraflow {

namespace {

// What each rank tells the dataflow rank: its node, the node's free memory as it sees it, and
// what it holds already (its own plan counts that, so it is added back to the free memory).
struct NodeReport {
  std::string host;
  std::uint64_t available = 0, resident = 0;
  std::string source;
};

std::vector<std::byte> encode(const NodeReport& r) {
  const auto text = fmt::format("{}\n{}\n{}\n{}", r.host, r.available, r.resident, r.source);
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

NodeReport decode(const std::vector<std::byte>& bytes) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  NodeReport r;
  std::string available, resident;
  std::getline(in, r.host);
  std::getline(in, available);
  std::getline(in, resident);
  std::getline(in, r.source);
  r.available = std::stoull(available);
  r.resident = std::stoull(resident);
  return r;
}

}  // namespace

std::vector<RankMemoryPlan> checkMemoryPlan(const Config& cfg, const RoleMap& map, const Comm& world) {
  if (cfg.run.memory_check == RunSection::MemoryCheck::Off) return {};
  const auto vocab = tokenSpecOf(*makeEnvironmentTokenizer(cfg.environment)).vocab_size;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const NodeMemory node = nodeMemory();
  const auto gathered =
      world.gatherBytes(map.dataflowRank(), encode({host, node.available, currentResidentBytes(), node.source}));
  std::map<std::string, std::vector<int>> ranks_of;
  std::vector<NodeReport> reports;
  for (const auto& bytes : gathered) reports.push_back(decode(bytes));
  for (std::size_t r = 0; r < reports.size(); ++r) ranks_of[reports[r].host].push_back(static_cast<int>(r));
  // Every rank's node, for the node-shared weights (counted once per node): the same plan everywhere.
  std::vector<int> node_of(static_cast<std::size_t>(world.size()), 0);
  int index = 0;
  for (const auto& [name, ranks] : ranks_of) {
    for (const int r : ranks) node_of[static_cast<std::size_t>(r)] = index;
    ++index;
  }
  {
    const auto* p = reinterpret_cast<const std::byte*>(node_of.data());
    const auto bytes = world.broadcastBytes(map.dataflowRank(), {p, p + node_of.size() * sizeof(int)});
    std::memcpy(node_of.data(), bytes.data(), std::min(bytes.size(), node_of.size() * sizeof(int)));
  }
  auto plans = planMemory(cfg, map, vocab, hostMemoryBytes(), node_of);
  std::string refusal;
  if (world.rank() == map.dataflowRank()) {
    for (const auto& [name, ranks] : ranks_of) {
      std::vector<RankMemoryPlan> mine;
      std::uint64_t available = reports[static_cast<std::size_t>(ranks.front())].available, held = 0;
      for (const int r : ranks) {
        mine.push_back(plans[static_cast<std::size_t>(r)]);
        available = std::min(available, reports[static_cast<std::size_t>(r)].available);
        held += reports[static_cast<std::size_t>(r)].resident;
      }
      const auto& source = reports[static_cast<std::size_t>(ranks.front())].source;
      spdlog::info("memory plan for node {} (docs/memory.md):\n{}", name,
                   formatMemoryPlan(mine, available + held, source + " + held by these ranks"));
      const auto why = memoryRefusal(mine, name, available + held, source + " + held by these ranks");
      if (!why.empty() && refusal.empty()) refusal = why;
    }
    if (!refusal.empty() && cfg.run.memory_check == RunSection::MemoryCheck::Warn) {
      spdlog::warn("{} (run.memory_check: warn: starting anyway)", refusal);
      refusal.clear();
    }
  }
  refusal = world.broadcastString(map.dataflowRank(), refusal);
  if (!refusal.empty()) throw ConfigError(refusal);
  return plans;
}

}  // namespace astraflow
