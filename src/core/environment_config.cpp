// The `environment` section: the built-in synthetic environments' options and the `dataset`
// environment's files, chat rendering and reward (docs/configuration.md, docs/tasks.md).
#include "core/environment_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "astraflow/core/config_checks.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/text_pattern.hpp"

namespace astraflow::detail {

namespace {

std::vector<std::string> registeredEnvironmentNames() {
  const auto& names = configChecks().environment_names;
  if (!names) throw std::logic_error("config: no environments are registered (link the astraflow target)");
  return names();
}

std::vector<std::string> absolutePaths(YamlReader& r, const std::string& key) {
  std::vector<std::string> files = r.requireStringList(key);
  if (files.empty()) r.fail(key, "is an empty list; give one or more JSONL files");
  for (auto& f : files) f = std::filesystem::absolute(f).lexically_normal().string();
  return files;
}

void parseReward(YamlReader r, RewardSpec& s) {
  s.kind = r.getEnum("kind", s.kind, kRewardKindNames);
  s.pattern = r.getString("pattern", s.pattern);
  if (s.kind == RewardKind::Regex && s.pattern.empty()) r.fail("pattern", "is required with kind: regex");
  if (!s.pattern.empty()) {
    // Compiled here once so a pattern that cannot work stops the run before it starts, not
    // every episode's reward; the reward function compiles its own copy.
    int groups = 0;
    try {
      groups = TextPattern(s.pattern, "environment.reward.pattern").groupCount();
    } catch (const Error& e) {
      r.fail("pattern", e.what());
    }
    if (s.kind == RewardKind::Math && groups < 1)
      r.fail("pattern", "needs a capturing group with kind: math (its first group is the answer)");
  }
  s.tolerance = r.getDouble("tolerance", s.tolerance, 0.0, 1.0);
  s.interpreter = r.getString("interpreter", s.interpreter);
  s.all_or_nothing = r.getBool("all_or_nothing", s.all_or_nothing);
  s.wall_seconds = r.getDouble("wall_seconds", s.wall_seconds, 0.01, 3600.0);
  s.memory_mb = static_cast<std::uint64_t>(
      r.getInt("memory_mb", static_cast<std::int64_t>(s.memory_mb), 16, std::int64_t{1} << 20, "MiB"));
  if (r.has("command")) s.command = r.requireStringList("command");
  if (s.kind == RewardKind::Command && s.command.empty())
    r.fail("command", "is required with kind: command (the verifier program and its arguments, a list)");
  s.command_timeout = r.getDouble("command_timeout", s.command_timeout, 0.01, 3600.0);
  s.persistent = r.getBool("persistent", s.persistent);
  if (s.persistent && s.kind != RewardKind::Command)
    r.fail("persistent", "is for kind: command (a verifier that stays running)");
  s.max_items = static_cast<std::uint64_t>(
      r.getInt("max_items", static_cast<std::int64_t>(s.max_items), 0, std::int64_t{1} << 40, "items"));
  if (s.max_items > 0 && !s.persistent) r.fail("max_items", "is for a persistent command (persistent: true)");
  s.url = r.getString("url", s.url);
  if (s.kind == RewardKind::Http && s.url.rfind("http://", 0) != 0)
    r.fail("url", "is required with kind: http, as http://host:port/path (the reward service's endpoint)");
  s.timeout_seconds = r.getDouble("timeout_seconds", s.timeout_seconds, 0.01, 86400.0);
  r.finish();
}

// The policies' folders, whose tokenizer and chat template the episodes are encoded with.
void policyFolders(YamlReader& r, Config& cfg) {
  DatasetTaskOptions& d = cfg.environment.dataset;
  for (const auto& p : cfg.policies) {
    if (p.model.hf_path.empty())
      r.fail("name",
             fmt::format("is {}, which encodes with the policy's own tokenizer and chat template, but policy "
                         "'{}' has no model.hf folder (make one with `astraflow init-model`, or use a Hugging Face "
                         "model folder)",
                         cfg.environment.name, p.name));
    d.tokenizer_folders.push_back(p.model.hf_path);
  }
}

// How the policy's turns are rendered: the system prompt and the template's thinking switch.
void chatKeys(YamlReader& r, DatasetTaskOptions& d) {
  d.system_prompt = r.getString("system_prompt", d.system_prompt);
  if (r.has("enable_thinking")) d.enable_thinking = r.getBool("enable_thinking", false) ? "true" : "false";
}

void parseDataset(YamlReader& r, Config& cfg) {
  DatasetTaskOptions& d = cfg.environment.dataset;
  d.train_files = absolutePaths(r, "train");
  if (r.has("eval")) d.eval_files = absolutePaths(r, "eval");
  d.eval_fraction = r.getDouble("eval_fraction", d.eval_fraction, 0.0, 0.9);
  if (!d.eval_files.empty() && d.eval_fraction > 0.0)
    r.fail("eval_fraction", "is set beside environment.eval; held-out rows come from one or the other");
  d.max_prompt_bytes = static_cast<std::uint64_t>(
      r.getInt("max_prompt_bytes", static_cast<std::int64_t>(d.max_prompt_bytes), 16, 1 << 30, "bytes"));
  chatKeys(r, d);
  d.solution_field = r.getString("solution_field", d.solution_field);
  d.seed = cfg.run.seed;
  policyFolders(r, cfg);
  parseReward(r.child("reward"), cfg.environment.reward);
}

void parseTool(YamlReader r, EnvironmentOptions& e) {
  ToolOptions& t = e.tool;
  t.max_context_tokens =
      static_cast<int>(r.getInt("max_context_tokens", t.max_context_tokens, 0, 1 << 24, "tokens (0: the model's)"));
  t.output_bytes = static_cast<std::uint64_t>(
      r.getInt("output_bytes", static_cast<std::int64_t>(t.output_bytes), 16, 1 << 24, "bytes"));
  const bool code = e.name == "code_interpreter";
  for (const char* key : {"interpreter", "wall_seconds", "memory_mb"})
    if (!code && r.has(key)) r.fail(key, fmt::format("belongs to code_interpreter; environment.name is '{}'", e.name));
  for (const char* key : {"corpus", "top_k", "document_bytes"})
    if (code && r.has(key)) r.fail(key, "belongs to doc_search; environment.name is 'code_interpreter'");
  t.interpreter = r.getString("interpreter", t.interpreter);
  t.wall_seconds = r.getDouble("wall_seconds", t.wall_seconds, 0.01, 3600.0);
  t.memory_mb = static_cast<std::uint64_t>(
      r.getInt("memory_mb", static_cast<std::int64_t>(t.memory_mb), 16, std::int64_t{1} << 20, "MiB"));
  if (!code) {
    if (!r.has("corpus"))
      r.fail("corpus", "is required with doc_search: a JSONL file of {\"text\", \"title\", \"id\"}");
    t.corpus = std::filesystem::absolute(r.getString("corpus", "")).lexically_normal().string();
  }
  t.top_k = static_cast<int>(r.getInt("top_k", t.top_k, 1, 100, "documents"));
  t.document_bytes = static_cast<std::uint64_t>(
      r.getInt("document_bytes", static_cast<std::int64_t>(t.document_bytes), 16, 1 << 24, "bytes"));
  r.finish();
}

// A server's address: `url` (a running one) or `command` (one the rank starts), exactly one.
void urlOrCommand(YamlReader& r, std::string& url, std::vector<std::string>& command, const char* url_is,
                  const char* command_is) {
  url = r.getString("url", url);
  if (r.has("command")) command = r.requireStringList("command");
  if (url.empty() == command.empty())
    r.fail("url", fmt::format("give one of url ({}) and command ({})", url_is, command_is));
  if (!url.empty() && url.rfind("http://", 0) != 0)
    r.fail("url", fmt::format("given '{}'; allowed: {} (https is not supported)", url, url_is));
}

// `env`: variables added to the host's environment for a server the rank starts.
std::vector<std::pair<std::string, std::string>> environmentVariables(YamlReader& r) {
  std::vector<std::pair<std::string, std::string>> vars;
  if (const auto env = r.raw("env")) {
    if (!env->IsMap()) r.fail("env", "given " + describe(*env) + "; allowed: a mapping of NAME: value");
    for (const auto& kv : *env) {
      if (!kv.second.IsScalar()) r.fail("env", "values must be strings");
      vars.emplace_back(kv.first.Scalar(), kv.second.Scalar());
    }
  }
  return vars;
}

// environment.tools: {mcp: [{name, command: [...] | url, env: {K: V}, timeout_seconds}, ...]}.
void parseTools(YamlReader r, EnvironmentOptions& e) {
  const auto nodes = r.requireSequence("mcp");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    YamlReader s(nodes[i], fmt::format("{}[{}]", r.keyPath("mcp"), i), r.source());
    if (!nodes[i].IsMap())
      s.failAt(nodes[i].Mark().line + 1, s.path(),
               "given " + describe(nodes[i]) + "; allowed: {name, command: [...] | url, env, timeout_seconds}");
    McpServerOptions m;
    m.name = s.requireString("name");
    for (const auto& other : e.mcp_servers)
      if (other.name == m.name) s.fail("name", fmt::format("MCP server '{}' is named twice", m.name));
    urlOrCommand(s, m.url, m.command, "http://host:port/path, a running server's streamable HTTP endpoint",
                 "the server program and its arguments, started over stdio");
    m.env = environmentVariables(s);
    m.timeout_seconds = s.getDouble("timeout_seconds", m.timeout_seconds, 0.1, 3600.0);
    s.finish();
    e.mcp_servers.push_back(std::move(m));
  }
  r.finish();
}

// A YAML value as JSON: mappings, sequences, and scalars as what they read as (a quoted scalar
// stays a string).
nlohmann::ordered_json toJson(const YAML::Node& n) {
  using json = nlohmann::ordered_json;
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = toJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(toJson(v));
    return a;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& text = n.Scalar();
  if (n.Tag() == "!") return text;
  if (text == "true" || text == "false") return text == "true";
  const json number = json::parse(text, nullptr, false);
  return number.is_number() ? number : json(text);
}

// environment.openenv: the server (url or command) and how episodes talk to it.
void parseOpenEnv(YamlReader r, EnvironmentOptions& e, const std::string& output_dir) {
  OpenEnvOptions& o = e.openenv;
  urlOrCommand(r, o.url, o.command, "http://host:port, a running server",
               "a server each rollout rank starts; {port} in an argument is the port it picks");
  if (!o.command.empty() &&
      std::none_of(o.command.begin(), o.command.end(), [](const std::string& a) { return a.find("{port}") != a.npos; }))
    r.fail("command",
           "has no {port} argument: the rank picks a free port and the server must listen on it "
           "(e.g. [python3, server.py, --port, \"{port}\"])");
  o.env = environmentVariables(r);
  const std::string log_dir = r.getString("log_dir", (std::filesystem::path(output_dir) / "openenv").string());
  o.log_dir = std::filesystem::absolute(log_dir).lexically_normal().string();
  o.server_per = r.getEnum("server_per", o.server_per, kOpenEnvServerScopeNames);
  if (o.command.empty() && r.has("server_per"))
    r.fail("server_per", "belongs to command: a url server is started by whoever runs it");
  o.interface = r.getEnum("interface", o.interface, kOpenEnvInterfaceNames);
  o.action_field = r.getString("action_field", o.action_field);
  if (o.action_field.empty()) r.fail("action_field", "is empty; name the action's text field (default: message)");
  if (o.interface == OpenEnvInterface::Mcp && r.has("action_field"))
    r.fail("action_field", "belongs to interface: text; with interface: mcp a turn's tool calls are the actions");
  o.observation_field = r.getString("observation_field", o.observation_field);
  o.observation_role = r.getEnum("observation_role", o.observation_role, kObservationRoleNames);
  if (const auto reset = r.raw("reset")) {
    if (!reset->IsMap()) r.fail("reset", "given " + describe(*reset) + "; allowed: a mapping (extra fields of /reset)");
    o.reset_json = toJson(*reset).dump();
  }
  o.seed_field = r.getString("seed_field", o.seed_field);
  o.eval_seed_start = static_cast<std::uint64_t>(r.getInt(
      "eval_seed_start", static_cast<std::int64_t>(o.eval_seed_start), 1, std::int64_t{1} << 53, "(a reset seed)"));
  o.reward = r.getEnum("reward", o.reward, kOpenEnvRewardNames);
  o.timeout_seconds = r.getDouble("timeout_seconds", o.timeout_seconds, 0.1, 3600.0);
  o.start_seconds = r.getDouble("start_seconds", o.start_seconds, 1.0, 3600.0);
  o.max_context_tokens =
      static_cast<int>(r.getInt("max_context_tokens", o.max_context_tokens, 0, 1 << 24, "tokens (0: the model's)"));
  o.observation_bytes = static_cast<std::uint64_t>(
      r.getInt("observation_bytes", static_cast<std::int64_t>(o.observation_bytes), 16, 1 << 24, "bytes"));
  if (r.has("stop")) o.stop = r.requireStringList("stop");
  o.demonstrations = r.getString("demonstrations", "");
  if (!o.demonstrations.empty())
    o.demonstrations = std::filesystem::absolute(o.demonstrations).lexically_normal().string();
  r.finish();
}

}  // namespace

void parseEnvironment(YamlReader r, Config& cfg) {
  EnvironmentOptions& e = cfg.environment;
  e.name = r.getChoice("name", e.name, registeredEnvironmentNames());
  e.digits = static_cast<int>(r.getInt("digits", e.digits, 1, 6, "digits"));
  e.operators = r.getString("operators", e.operators);
  if (e.operators.empty() || e.operators.find_first_not_of("+-*") != std::string::npos) {
    r.fail("operators", "given '" + e.operators + "'; allowed: a non-empty string of + - *");
  }
  e.corpus_size = static_cast<int>(r.getInt("corpus_size", e.corpus_size, 4, 10000, "facts"));
  e.max_turns = static_cast<int>(r.getInt("max_turns", e.max_turns, 1, 16, "turns"));
  e.corpus_seed = static_cast<std::uint64_t>(
      r.getInt("corpus_seed", static_cast<std::int64_t>(e.corpus_seed), 0, std::numeric_limits<std::int64_t>::max()));
  if (usesPromptDataset(e.name)) {
    parseDataset(r, cfg);
    if (e.name != "dataset") {
      parseTool(r.child("tool"), e);
    } else if (r.has("tool")) {
      r.fail("tool", "belongs to the tool environments (code_interpreter, doc_search); environment.name is 'dataset'");
    }
    if (r.has("tools")) parseTools(r.child("tools"), e);
    if (r.has("openenv")) r.fail("openenv", fmt::format("belongs to environment.name: openenv, not '{}'", e.name));
  } else if (e.name == "openenv") {
    chatKeys(r, e.dataset);
    policyFolders(r, cfg);
    if (!r.has("openenv")) r.fail("openenv", "is required with environment.name: openenv (url or command, ...)");
    parseOpenEnv(r.child("openenv"), e, cfg.run.output_dir);
    for (const char* key : {"train", "eval", "eval_fraction", "max_prompt_bytes", "solution_field", "reward", "tool"})
      if (r.has(key)) r.fail(key, "belongs to the dataset environments; an openenv episode's reward is the server's");
    if (r.has("tools")) parseTools(r.child("tools"), e);
  } else {
    if (r.has("openenv")) r.fail("openenv", fmt::format("belongs to environment.name: openenv, not '{}'", e.name));
    for (const char* key : {"train", "eval", "eval_fraction", "max_prompt_bytes", "system_prompt", "solution_field",
                            "enable_thinking", "reward", "tool", "tools"}) {
      if (r.has(key))
        r.fail(key, fmt::format("belongs to the dataset environments (dataset, code_interpreter, doc_search); "
                                "environment.name is '{}'",
                                e.name));
    }
  }
  r.finish();
}

void checkEnvironment(const Config& cfg) {
  const DatasetTaskOptions& d = cfg.environment.dataset;
  if (usesPromptDataset(cfg.environment.name) && cfg.eval.problems > 0 && d.eval_files.empty() &&
      d.eval_fraction == 0.0)
    throw ConfigError(fmt::format(
        "{}: eval.problems is {} but the {} environment has no held-out rows; set environment.eval (files) or "
        "environment.eval_fraction, or eval.problems: 0",
        cfg.source, cfg.eval.problems, cfg.environment.name));
}

}  // namespace astraflow::detail
