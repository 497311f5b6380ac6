// The arguments and options of the inference servers a pool starts (server_launch.hpp).
#include "rollout/server_launch.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "astraflow/core/placeholders.hpp"
#include "rollout/rollout_rank.hpp"

namespace astraflow::rollout_detail {
namespace {

// `--flag value` or `--flag=value` among the arguments.
bool givesFlag(const std::vector<std::string>& argv, const std::string& flag) {
  return std::any_of(argv.begin(), argv.end(),
                     [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

}  // namespace

std::vector<std::string> launchArguments(const RolloutBackendSpec& spec, int port, const std::string& folder,
                                         int local_rank) {
  std::vector<std::string> argv;
  for (const auto& a : spec.launch.command)
    argv.push_back(
        withPlaceholder(withPlaceholder(withPlaceholder(a, "{port}", std::to_string(port)), "{model}", folder),
                        "{local_rank}", std::to_string(local_rank)));
  // A flag the command gives, or whose value it placed itself ({model}, {port}), is not added.
  const auto add = [&](const std::string& flag, const std::string& value, const char* placeholder) {
    if (givesFlag(argv, flag) || (placeholder != nullptr && holdsPlaceholder(spec.launch.command, placeholder))) return;
    argv.insert(argv.end(), {flag, value});
  };
  if (spec.api == HttpApi::Vllm) {
    add("--model", folder, "{model}");
    add("--port", std::to_string(port), "{port}");
    add("--host", "127.0.0.1", nullptr);
    // Log-probs after the temperature, as the trainer computes them (vLLM's default is before).
    add("--logprobs-mode", "processed_logprobs", nullptr);
    // Answers say how much of each prompt came from the prefix cache (backend_cached_prompt_tokens).
    if (!givesFlag(argv, "--enable-prompt-tokens-details")) argv.push_back("--enable-prompt-tokens-details");
  } else if (spec.api == HttpApi::Sglang) {
    add("--model-path", folder, "{model}");
    add("--port", std::to_string(port), "{port}");
    add("--host", "127.0.0.1", nullptr);
  }
  return argv;
}

std::vector<std::pair<std::string, std::string>> launchEnvironment(const RolloutBackendSpec& spec, int local_rank) {
  std::vector<std::pair<std::string, std::string>> env;
  bool dev_mode = false;
  for (const auto& [name, value] : spec.launch.env) {
    env.emplace_back(name, withPlaceholder(value, "{local_rank}", std::to_string(local_rank)));
    dev_mode = dev_mode || name == "VLLM_SERVER_DEV_MODE";
  }
  // vLLM's /pause, /collective_rpc, /reset_prefix_cache and /update_weight_version.
  if (spec.api == HttpApi::Vllm && !dev_mode) env.emplace_back("VLLM_SERVER_DEV_MODE", "1");
  return env;
}

int localRankFromEnvironment() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (*end == '\0' && n >= 0 && n < 1 << 20) return static_cast<int>(n);
  }
  return 0;
}

ManagedServerOptions launchOptions(const RolloutBackendSpec& spec, int pool, const std::string& policy,
                                   const std::string& log_dir, std::function<std::string()> folder) {
  const int local_rank = localRankFromEnvironment();
  ManagedServerOptions o;
  o.config_key = fmt::format("layout[{}].backend.launch", pool);
  o.name = std::string(enumName(kHttpApiNames, spec.api));
  // A node's ranks share a server of the same pool, policy, command and environment (and run:
  // its log folder is the run's by default).
  o.identity = fmt::format("{}\x1d{}\x1d{}\x1d{}", pool, policy, log_dir, spec.weights_dir);
  for (const auto& a : spec.launch.command) o.identity += '\x1f' + a;
  for (const auto& [k, v] : spec.launch.env) o.identity += '\x1e' + k + '=' + v;
  o.command = [spec, folder = std::move(folder), local_rank](int port) {
    return launchArguments(spec, port, folder(), local_rank);
  };
  o.env = launchEnvironment(spec, local_rank);
  o.log_dir = log_dir;
  o.per_node = spec.launch.per == LaunchScope::Node;
  o.start_seconds = spec.launch.start_seconds;
  o.max_restarts = spec.launch.max_restarts;
  return o;
}

}  // namespace astraflow::rollout_detail

// RolloutRank's launched servers (rollout_rank.hpp).
namespace astraflow::rollout_detail {

void RolloutRank::startServer(ServedPolicy& p, const std::filesystem::path& folder) {
  const auto& spec = ports_.backend;
  const std::string log_dir = spec.launch.log_dir.empty() ? (ctx_.run_dir / "servers").string() : spec.launch.log_dir;
  // Every start begins from the first version's weights, pinned (the rank then loads the version
  // it holds into it).
  const std::string start = p.folders->pinned(folder).string();
  p.server =
      std::make_unique<ManagedServer>(launchOptions(spec, ports_.pool, p.name, log_dir, [start] { return start; }));
  const ManagedServer::Endpoint e = p.server->endpoint();
  p.http->redirect(e.url);
  p.server_generation = e.generation;
  spdlog::info("rollout rank {}: policy '{}' is served by {} (start {})", ctx_.rank, p.name, e.url, e.generation);
}

void RolloutRank::reviveServers() {
  bool moved = false;
  for (auto& p : served_) {
    if (!p.server || (p.http->unreachableSeconds() <= 0 && !p.server_loading)) continue;
    const double now = ctx_.now();
    // A per-rank server's check is a waitpid; a node's, a /health call: ten a second at most
    // while its requests fail (each failed episode goes back until the server is up again).
    if (now - p.server_checked < 0.1) continue;
    p.server_checked = now;
    if (p.server->givenUp()) continue;  // its requests fail: lost_after_seconds takes the rank out
    if (p.server->reviveIfDead(p.server_generation, std::chrono::milliseconds(0))) {
      // Updates go to the new server at once, requests once it holds this rank's version: until
      // then they fail against the dead one and their episodes go back to be re-issued, never
      // generated from the weights it started with.
      const ManagedServer::Endpoint e = p.server->endpoint();
      p.http->redirect(e.url, /*requests=*/false);
      p.server_generation = e.generation;
      p.server_loading = true;
      p.version = -1;
      p.load_retry_at = now, p.load_backoff = 0;
      moved = true;
      spdlog::warn("rollout rank {}: policy '{}' is served again by {} (start {})", ctx_.rank, p.name, e.url,
                   e.generation);
    } else if (p.server_loading && now >= p.load_retry_at) {
      moved = true;  // alive, its load failed last time: tried again below, backing off
    }
  }
  if (!moved) return;
  refreshWeights(true);
  for (auto& p : served_) {
    if (!p.server_loading) continue;
    if (p.version < 0) {  // the load failed (counted in backend_weight_update_failures)
      p.load_backoff = std::min(30.0, std::max(1.0, 2 * p.load_backoff));
      p.load_retry_at = ctx_.now() + p.load_backoff;
      continue;
    }
    p.server_loading = false;
    p.http->redirect(p.server->endpoint().url);
  }
}

}  // namespace astraflow::rollout_detail
