// `astraflow env check` (apps/env_command.hpp). The scripted policy: a call of each MCP tool
// (environment.tools.mcp's and an MCP-style OpenEnv server's own) with sample arguments drawn
// from its schema (a number 1, a string "test", ...) while turns are left, then the environment's
// reference answer (a dataset row's solution or its \boxed{answer}), or "I do not know." where it
// has none — so the tools, their replies and the reward program all answer once per episode, and
// what comes back is printed as the policy would see it.
#include "apps/env_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "astraflow/tasks/reward_worker.hpp"

namespace astraflow {

struct EnvCheckArgs {
  std::string config;
  std::vector<std::string> overrides;
  int episodes = 3;
  int show_chars = 1200;  // of each prompt and reply printed (its end: where the policy continues)
};

namespace {

using Json = nlohmann::ordered_json;

std::string tail(const std::string& text, int chars) {
  if (static_cast<int>(text.size()) <= chars) return text;
  return fmt::format("[... {} characters before]\n", text.size() - static_cast<std::size_t>(chars)) +
         text.substr(text.size() - static_cast<std::size_t>(chars));
}

// Arguments a schema accepts: each required property with a value of its type.
Json sampleArguments(const Json& schema) {
  Json args = Json::object();
  const Json properties = schema.value("properties", Json::object());
  for (const auto& name : schema.value("required", Json::array())) {
    if (!name.is_string()) continue;
    const std::string type = properties.value(name.get<std::string>(), Json::object()).value("type", "string");
    args[name.get<std::string>()] = type == "number" || type == "integer" ? Json(1)
                                    : type == "boolean"                   ? Json(true)
                                    : type == "array"                     ? Json::array()
                                    : type == "object"                    ? Json::object()
                                                                          : Json("test");
  }
  return args;
}

std::vector<std::string> scriptedTurns(const Environment& env, const std::vector<McpTool>& tools) {
  std::vector<std::string> turns;
  for (const auto& t : tools) {
    if (static_cast<int>(turns.size()) + 1 >= env.maxTurns()) break;  // keep the last turn for the answer
    turns.push_back("<tool_call>\n" + Json{{"name", t.name}, {"arguments", sampleArguments(t.input_schema)}}.dump() +
                    "\n</tool_call>");
  }
  const auto reference = env.referenceActions();
  turns.insert(turns.end(), reference.begin(), reference.end());
  // No reference (an OpenEnv server knows the solutions, not us): the same plain turn until the
  // episode ends, so the environment's replies to a wrong answer show.
  if (reference.empty()) turns.resize(std::max<std::size_t>(turns.size() + 1, env.maxTurns()), "I do not know.");
  return turns;
}

int envCheck(const EnvCheckArgs& a) {
  const Config cfg = loadConfig(a.config, a.overrides);
  const EnvironmentOptions& options = cfg.environment;
  std::printf("environment %s (%s)\n", options.name.c_str(), a.config.c_str());
  std::vector<McpTool> tools;
  for (const auto& server : options.mcp_servers) {
    const auto client = sharedMcpClient(server);
    std::printf("MCP server '%s': %zu tools\n", server.name.c_str(), client->tools().size());
    for (const auto& t : client->tools()) {
      std::printf("  %s: %s\n", t.name.c_str(), t.functionSchema()["function"].dump().c_str());
      tools.push_back(t);
    }
  }
  const auto env = makeEnvironment(options);
  std::map<std::string, int> reasons;
  for (int k = 0; k < a.episodes; ++k) {
    const std::uint64_t id = env->referenceId(static_cast<std::uint64_t>(k));
    std::printf("\n=== episode %d (problem %llu) ===\n--- prompt ---\n%s\n", k + 1, static_cast<unsigned long long>(id),
                tail(env->reset(id), a.show_chars).c_str());
    // The environment's own tools (an MCP-style OpenEnv server's) are known after its reset.
    std::vector<McpTool> episode_tools = tools;
    for (const auto& t : env->servedTools()) {
      if (k == 0)
        std::printf("environment tool %s: %s\n", t.name.c_str(), t.functionSchema()["function"].dump().c_str());
      episode_tools.push_back(t);
    }
    StepResult r;
    for (const auto& turn : scriptedTurns(*env, episode_tools)) {
      std::printf("--- policy (scripted) ---\n%s\n", tail(turn, a.show_chars).c_str());
      r = env->step(turn);
      if (r.done) break;
      std::printf("--- environment ---\n%s\n", tail(r.observation, a.show_chars).c_str());
    }
    std::printf("--- reward %g, reason %s%s ---\n", r.reward, r.reason.empty() ? "(none)" : r.reason.c_str(),
                r.done ? "" : " (the episode did not end)");
    ++reasons[r.reason.empty() ? "(none)" : r.reason];
  }
  const McpCounters m = sharedMcpCounters();
  const RewardWorkerCounters v = sharedRewardWorkerCounters();
  std::string why;
  for (const auto& [reason, n] : reasons) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", n, reason);
  std::printf(
      "\n%d episodes: %s; tool calls %llu (%llu errors, %llu timed out, %llu servers restarted); "
      "verifier processes started %llu (%llu restarts)\n",
      a.episodes, why.c_str(), static_cast<unsigned long long>(m.calls), static_cast<unsigned long long>(m.errors),
      static_cast<unsigned long long>(m.timeouts), static_cast<unsigned long long>(m.restarts),
      static_cast<unsigned long long>(v.started), static_cast<unsigned long long>(v.restarts));
  if (options.name == "openenv") {
    const OpenEnvCounters o = sharedOpenEnvCounters();
    std::printf(
        "OpenEnv: %llu sessions, %llu replies, %llu failed (%llu timed out, %llu malformed), %llu servers "
        "restarted\n",
        static_cast<unsigned long long>(o.sessions), static_cast<unsigned long long>(o.steps),
        static_cast<unsigned long long>(o.errors), static_cast<unsigned long long>(o.timeouts),
        static_cast<unsigned long long>(o.malformed), static_cast<unsigned long long>(o.restarts));
  }
  return 0;
}

}  // namespace

EnvCommand addEnvCommand(CLI::App& app) {
  EnvCommand c;
  c.args = std::make_shared<EnvCheckArgs>();
  EnvCheckArgs& a = *c.args;
  auto* env = app.add_subcommand("env", "the environment of a config, without a run");
  env->require_subcommand(1);
  c.check = env->add_subcommand(
      "check",
      "start the config's environment, MCP servers and reward program, play a few episodes with a scripted policy "
      "and print what the policy would see and what came back");
  c.check->add_option("config", a.config, "YAML config")->required();
  c.check->add_option("--set", a.overrides, "override a config key: key.path=value (repeatable)");
  c.check->add_option("--episodes", a.episodes, "episodes to play (default 3)")->check(CLI::Range(1, 1000));
  c.check->add_option("--show-chars", a.show_chars, "characters shown of each prompt and reply, from the end (1200)")
      ->check(CLI::Range(80, 10000000));
  return c;
}

int EnvCommand::run() const {
  if (check == nullptr || !*check) return -1;
  try {
    return envCheck(*args);
  } catch (const std::exception& e) {  // a config error, a server that does not start, an environment that throws
    std::fprintf(stderr, "astraflow: env check: %s\n", e.what());
    return 2;
  }
}

}  // namespace astraflow
