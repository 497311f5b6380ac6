// The `environment` section declared once (config_schema.hpp): the synthetic environments'
// keys, the dataset environments' files and chat keys, `reward`, `tool`, `tools` and `openenv`,
// and the checks that say which keys go with which environment. docs/configuration.md's table
// is generated from it; environment_config.cpp adds what comes from other sections.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "astraflow/core/config_checks.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/text_pattern.hpp"
#include "core/environment_config.hpp"
#include "core/layout_config.hpp"

namespace astraflow::detail {

namespace {

std::vector<std::string> registeredEnvironmentNames() {
  const auto& names = configChecks().environment_names;
  if (!names) throw std::logic_error("config: no environments are registered (link the astraflow target)");
  return names();
}

// A path the config gives, made absolute (relative to the working directory); an empty one is
// refused naming the key.
std::string absolutePath(YamlReader& r, const std::string& key, const std::string& path) {
  if (path.empty()) r.fail(key, "holds an empty path");
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::vector<std::string> absolutePaths(YamlReader& r, const std::string& key) {
  std::vector<std::string> files = r.requireStringList(key);
  if (files.empty()) r.fail(key, "is an empty list; give one or more JSONL files");
  for (auto& f : files) f = absolutePath(r, key, f);
  return files;
}

}  // namespace

// A list of strings, when the key is given.
void readList(YamlReader& r, const char* key, std::vector<std::string>& out) {
  if (r.has(key)) out = r.requireStringList(key);
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

namespace {

// A server's address: `url` (a running one) or `command` (one the rank starts), exactly one.
void checkUrlOrCommand(YamlReader& r, const std::string& url, const std::vector<std::string>& command,
                       const char* url_is, const char* command_is) {
  if (url.empty() == command.empty())
    r.fail("url", fmt::format("give one of url ({}) and command ({})", url_is, command_is));
  if (!url.empty() && url.rfind("http://", 0) != 0)
    r.fail("url", fmt::format("given '{}'; allowed: {} (https is not supported)", url, url_is));
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

// environment.tools: {mcp: [{name, command: [...] | url, env: {K: V}, timeout_seconds}, ...]}.
void readTools(YamlReader r, EnvironmentOptions& e) {
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
    m.url = s.getString("url", m.url);
    readList(s, "command", m.command);
    checkUrlOrCommand(s, m.url, m.command, "http://host:port/path, a running server's streamable HTTP endpoint",
                      "the server program and its arguments, started over stdio");
    m.env = environmentVariables(s);
    m.timeout_seconds = s.getDouble("timeout_seconds", m.timeout_seconds, 0.1, 3600.0);
    s.finish();
    e.mcp_servers.push_back(std::move(m));
  }
  r.finish();
}

}  // namespace

void readEvalSets(YamlReader& r, std::vector<EvalSetSpec>& sets) {
  const auto given = r.raw("sets");
  if (!given || (given->IsSequence() && given->size() == 0)) return;  // `sets: []`: none
  const auto nodes = r.requireSequence("sets");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    YamlReader s(nodes[i], fmt::format("{}[{}]", r.keyPath("sets"), i), r.source());
    if (!nodes[i].IsMap())
      s.failAt(nodes[i].Mark().line + 1, s.path(),
               "given " + describe(nodes[i]) + "; allowed: {name, path, problems, samples}");
    EvalSetSpec set;
    set.name = s.requireString("name");
    requireIdentifier(s, "name", set.name);
    if (set.name == "held_out")
      s.fail("name",
             "is held_out, the name of the environment's own held-out rows (environment.eval or eval_fraction); "
             "choose another");
    for (const auto& other : sets)
      if (other.name == set.name) s.fail("name", fmt::format("eval set '{}' is named twice", set.name));
    const auto path = s.raw("path");
    if (path && path->IsScalar())
      set.files = {absolutePath(s, "path", path->Scalar())};
    else
      set.files = absolutePaths(s, "path");
    set.problems = static_cast<std::uint64_t>(s.getInt("problems", 0, 0, 1 << 24, "problems"));
    set.samples = static_cast<int>(s.getInt("samples", 0, 0, 1024, "samples"));
    s.finish();
    sets.push_back(std::move(set));
  }
}

const SectionSchema<PromptRewrite>& promptRewriteSchema() {
  using P = PromptRewrite;
  static const auto schema =
      SectionSchema<P>("environment.prompt_rewrite")
          .custom("strip_suffix", "string or list of strings", "none", "text",
                  "dataset: a suffix taken off each prompt (its text, or its last user message) where it ends it, "
                  "spaces aside; of a list, the first that ends it (e.g. DAPO's \"Let's think step by step and "
                  "output the final answer within \\boxed{}.\")",
                  [](YamlReader& r, P& p) {
                    const auto node = r.raw("strip_suffix");
                    if (!node) return;
                    if (node->IsScalar()) {
                      p.strip_suffixes = {node->Scalar()};
                    } else {
                      p.strip_suffixes = r.requireStringList("strip_suffix");
                    }
                    for (const auto& s : p.strip_suffixes)
                      if (s.empty()) r.fail("strip_suffix", "holds an empty suffix; allowed: non-empty text");
                  })
          .text("append", &P::append, "text",
                "dataset: text added to each prompt after the strip (e.g. a single-agent run's \"\\nLet's think step "
                "by step. Please put your final answer within \\boxed{}.\")");
  return schema;
}

// environment.columns: which column holds each part of a row.
void readColumns(YamlReader& r, DatasetTaskOptions& d) {
  const auto node = r.raw("columns");
  if (!node) return;
  if (!node->IsMap()) r.fail("columns", "given " + describe(*node) + "; allowed: a mapping part: column");
  for (const auto& kv : *node) {
    const std::string part = kv.first.as<std::string>();
    if (part != "prompt" && part != "messages" && part != "answer" && part != "tests")
      r.fail("columns", fmt::format("'{}' is not a part of a row; allowed: prompt, messages, answer, tests", part));
    if (!kv.second.IsScalar() || kv.second.Scalar().empty())
      r.fail("columns", fmt::format("{}: allowed: a column name (a dotted path reaches into a struct)", part));
    d.columns[part] = kv.second.Scalar();
  }
  if (d.columns.count("prompt") && d.columns.count("messages"))
    r.fail("columns", "names both prompt and messages; a row has one or the other");
}

const SectionSchema<DatasetTaskOptions>& datasetSchema() {
  using D = DatasetTaskOptions;
  static const auto schema =
      SectionSchema<D>("environment")
          .custom("train", "list of paths", "required (dataset environments)",
                  "JSONL, Parquet (`.parquet`) or Arrow (`.arrow`) files, or `datasets` folders",
                  "dataset: training rows (relative paths from the working directory; docs/tasks.md, \"Files\")",
                  [](YamlReader& r, D& d) {
                    if (r.has("train")) d.train_files = absolutePaths(r, "train");
                  })
          .custom("eval", "list of paths", "none", "as `train`",
                  "dataset: held-out rows for evaluation; absent: `eval_fraction` of `train`",
                  [](YamlReader& r, D& d) {
                    if (r.has("eval")) d.eval_files = absolutePaths(r, "eval");
                  })
          .number("eval_fraction", &D::eval_fraction, 0.0, 0.9, "",
                  "dataset: rows of `train` held out by a hash of (run.seed, content); not with `eval`. "
                  "`eval.problems > 0` needs `eval` or this")
          .integer("max_prompt_bytes", &D::max_prompt_bytes, 16, 1 << 30, "bytes",
                   "dataset: longer prompts are skipped and counted")
          .integer("max_prompt_tokens", &D::max_prompt_tokens, 0, 1 << 24, "tokens",
                   "dataset: rows whose prompt, rendered by the chat template with the system prompt and the "
                   "generation prompt, has more of the policy's tokens are skipped and counted; 0: no limit")
          .custom("columns", "mapping part → column", "verl's layout and the common names",
                  "parts `prompt`, `messages`, `answer`, `tests` (the code reward's); a column name or a dotted "
                  "path into a struct",
                  "dataset: the columns a row's parts are in (e.g. `{prompt: problem, answer: solution}`); without "
                  "one, `prompt` (text, or a conversation as verl writes it), `messages`, `problem` or `question`, "
                  "and `answer` or `reward_model.ground_truth` are read",
                  readColumns)
          .nested("prompt_rewrite", &D::rewrite, promptRewriteSchema())
          .text("system_prompt", &D::system_prompt, "text",
                "dataset: a system message put before each row's conversation (a row with its own system message "
                "keeps it); openenv: before the first observation")
          .text("solution_field", &D::solution_field, "row field",
                "dataset: the worked answer warm-start SFT trains on; a row without one trains on `\\boxed{answer}` "
                "(math, choice) or the answer (exact)")
          .custom("enable_thinking", "bool", "unset", "",
                  "dataset, openenv: passed to the chat template (Qwen3's thinking switch); unset: not passed",
                  [](YamlReader& r, D& d) {
                    if (r.has("enable_thinking"))
                      d.enable_thinking = r.getBool("enable_thinking", false) ? "true" : "false";
                  })
          .rule("held_out_rows", "`eval` and `eval_fraction` are not both set", [](YamlReader& r, const D& d) {
            if (!d.eval_files.empty() && d.eval_fraction > 0.0)
              r.fail("eval_fraction", "is set beside environment.eval; held-out rows come from one or the other");
          });
  return schema;
}

const SectionSchema<RewardSpec>& rewardSchema() {
  using R = RewardSpec;
  static const auto schema =
      SectionSchema<R>("environment.reward")
          .choice("kind", &R::kind, kRewardKindNames, "dataset environments: the reward function (docs/tasks.md)")
          .text(
              "pattern", &R::pattern, "RE2 pattern (docs/tasks.md, \"Patterns\")",
              "math: the answer line read without `\\boxed{}`, its first group the answer (empty: the answer lines of "
              "docs/tasks.md, then the last expression); regex: the pattern (required)")
          .integer("decimals", &R::decimals, 0, 30, "places",
                   "math: an answer written with a decimal point equals a value that agrees with it rounded to this "
                   "many places (math-verify's float_rounding); exact numbers are compared exactly")
          .text("interpreter", &R::interpreter, "path or name",
                "code: the interpreter the sandbox runs the program with")
          .boolean("all_or_nothing", &R::all_or_nothing,
                   "code: reward 1 only when every test passes (stops at the first failure); else the fraction passed")
          .number("wall_seconds", &R::wall_seconds, 0.01, 3600.0, "seconds", "code: each test run's wall limit")
          .integer("memory_mb", &R::memory_mb, 16, std::int64_t{1} << 20, "MiB",
                   "code: each process's address-space limit")
          .custom("command", "list of strings", "required for `command`", "argv",
                  "command: the verifier program and its arguments",
                  [](YamlReader& r, R& s) { readList(r, "command", s.command); })
          .number("command_timeout", &R::command_timeout, 0.01, 3600.0, "seconds",
                  "command: the verifier is killed past it (reward 0, `timeout`)")
          .boolean("persistent", &R::persistent,
                   "command: start the verifier once per rollout rank; it reads one JSON object per line and "
                   "answers one line each (docs/tasks.md, \"Your own verifier, kept running\")")
          .integer("max_items", &R::max_items, 0, std::int64_t{1} << 40, "items",
                   "command, persistent: start the worker again after this many items", "0 = never")
          .text("url", &R::url, "`http://host[:port]/path`",
                "http: the verifier service the object is POSTed to; the body is the answer")
          .number("timeout_seconds", &R::timeout_seconds, 0.01, 86400.0, "seconds",
                  "the whole reward call: past it reward 0, reason `timeout` (counted with the other reasons). code: "
                  "all test runs together (each run gets what is left; tests not started fail as `timeout`); "
                  "command: the verifier is killed at the smaller of this and `command_timeout` (persistent: per "
                  "item); http: each request's limit; math/exact/regex/choice run in time linear in the response "
                  "and are held to it when they return")
          .rule("pattern",
                "a `pattern` compiles (RE2), and with `kind: math` has a capturing group (its first group is the "
                "answer); `kind: regex` needs one. Compiled when the config is read, so a pattern that cannot work "
                "stops the run before it starts",
                [](YamlReader& r, const R& s) {
                  if (s.kind == RewardKind::Regex && s.pattern.empty())
                    r.fail("pattern", "is required with kind: regex");
                  if (s.pattern.empty()) return;
                  int groups = 0;
                  try {
                    groups = TextPattern(s.pattern, "environment.reward.pattern").groupCount();
                  } catch (const Error& e) {
                    r.fail("pattern", e.what());
                  }
                  if (s.kind == RewardKind::Math && groups < 1)
                    r.fail("pattern", "needs a capturing group with kind: math (its first group is the answer)");
                })
          .rule("command", "`kind: command` needs `command`; `persistent` only with it, `max_items` only persistent",
                [](YamlReader& r, const R& s) {
                  if (s.kind == RewardKind::Command && s.command.empty())
                    r.fail("command",
                           "is required with kind: command (the verifier program and its arguments, a list)");
                  if (s.persistent && s.kind != RewardKind::Command)
                    r.fail("persistent", "is for kind: command (a verifier that stays running)");
                  if (s.max_items > 0 && !s.persistent)
                    r.fail("max_items", "is for a persistent command (persistent: true)");
                })
          .rule("http_url", "`kind: http` needs an `http://` `url`", [](YamlReader& r, const R& s) {
            if (s.kind == RewardKind::Http && s.url.rfind("http://", 0) != 0)
              r.fail("url", "is required with kind: http, as http://host:port/path (the reward service's endpoint)");
          });
  return schema;
}

const SectionSchema<ToolOptions>& toolSchema() {
  using T = ToolOptions;
  static const auto schema =
      SectionSchema<T>("environment.tool")
          .integer("max_context_tokens", &T::max_context_tokens, 0, 1 << 24, "tokens",
                   "code_interpreter, doc_search: an episode reaching it ends truncated", "0 = the model's")
          .integer("output_bytes", &T::output_bytes, 16, 1 << 24, "bytes",
                   "code_interpreter, doc_search: a tool reply is cut there (the cut is said)")
          .text("interpreter", &T::interpreter, "path or name",
                "code_interpreter: runs the `python` tool's code in the sandbox")
          .number("wall_seconds", &T::wall_seconds, 0.01, 3600.0, "seconds",
                  "code_interpreter: wall and CPU limit of one code run")
          .integer("memory_mb", &T::memory_mb, 16, std::int64_t{1} << 20, "MiB",
                   "code_interpreter: address-space limit of one code run")
          .custom("corpus", "path", "required for `doc_search`", "JSONL",
                  "doc_search: the documents (`{\"text\", \"title\"?, \"id\"?}` per line), indexed with BM25",
                  [](YamlReader& r, T& t) {
                    if (r.has("corpus")) t.corpus = absolutePath(r, "corpus", r.getString("corpus", ""));
                  })
          .integer("top_k", &T::top_k, 1, 100, "documents", "doc_search: documents per search reply")
          .integer("document_bytes", &T::document_bytes, 16, 1 << 24, "bytes",
                   "doc_search: each document's text is cut there in a reply");
  return schema;
}

namespace {

using O = OpenEnvOptions;

// environment.openenv: how the server is reached (url) or started (command, its scope, variables
// and log folder).
void openEnvServerKeys(SectionSchema<O>& s) {
  s.text("url", &O::url, "`http://host:port`",
         "openenv: a running OpenEnv server (one of `url` and `command`); its `/health` must answer before "
         "the rank's first episode")
      .custom("command", "list of strings", "none", "the program and its arguments, one of them holding `{port}`",
              "openenv: the server each rollout rank (or each node: `server_per`) starts itself on a free port "
              "it picks (`{port}` replaced), health-checked, started again when it dies",
              [](YamlReader& r, O& o) { readList(r, "command", o.command); })
      .choice("server_per", &O::server_per, kOpenEnvServerScopeNames,
              "openenv, with `command`: `rank` — each rollout rank starts its own server; `node` — the first "
              "rank of a node to need one starts it and the node's other ranks use it (they meet in "
              "`${TMPDIR:-/tmp}/astraflow-<uid>/`; its starter stops it once they are done; a server that dies "
              "is started again once for the node, by the first rank to see it). Refused with `url`")
      .custom("env", "mapping", "none", "NAME: value",
              "openenv: added to the host's environment for a started server (`PYTHONUNBUFFERED=1` is always "
              "set)",
              [](YamlReader& r, O& o) { o.env = environmentVariables(r); })
      .text("log_dir", &O::log_dir, "a folder",
            "openenv: a started server's stdout and stderr, one file per start "
            "(`openenv-<host>-<pid>-<n>.log`)",
            "`<run.output_dir>/openenv`");
}

// How an episode talks to the server: actions, observations, resets, rewards and limits.
void openEnvEpisodeKeys(SectionSchema<O>& s) {
  s.choice("interface", &O::interface, kOpenEnvInterfaceNames,
           "openenv: how a turn becomes an action. `text`: the turn's text in `action_field`; `mcp`: the "
           "server is an MCP-style environment (openenv-core's `MCPEnvironment`): its tools are listed "
           "(`ListToolsAction`) and shown by the chat template, each tool call is sent as a "
           "`CallToolAction` and answered as a tool turn, a turn without one ends the episode; "
           "`action_field` is refused with it")
      .text("action_field", &O::action_field, "a field name",
            "openenv: the action object's field that receives the policy's turn (`{\"message\": \"...\"}`)")
      .text("observation_field", &O::observation_field, "a field name",
            "openenv: the observation field shown to the policy; empty: its first string field (named in the "
            "log), else the whole observation as JSON")
      .choice("observation_role", &O::observation_role, kObservationRoleNames,
              "openenv: the chat role observations after the first are rendered as (the first is always a "
              "user turn)")
      .custom("reset", "mapping", "none", "any YAML mapping",
              "openenv: extra fields of every reset's `data` (e.g. a difficulty), beside the seed",
              [](YamlReader& r, O& o) {
                if (const auto reset = r.raw("reset")) {
                  if (!reset->IsMap())
                    r.fail("reset", "given " + describe(*reset) + "; allowed: a mapping (extra fields of /reset)");
                  o.reset_json = toJson(*reset).dump();
                }
              })
      .text("seed_field", &O::seed_field, "a field name",
            "openenv: the reset field that carries the episode's seed (its problem id)")
      .integer("eval_seed_start", &O::eval_seed_start, 1, std::int64_t{1} << 53, "",
               "openenv: training seeds are 0 … eval_seed_start−1 (cycled), held-out seeds eval_seed_start, +1, …")
      .choice("reward", &O::reward, kOpenEnvRewardNames, "openenv: the episode's reward from the server's step rewards")
      .number("timeout_seconds", &O::timeout_seconds, 0.1, 3600.0, "seconds",
              "openenv: each connect, reset and step; past it the episode ends with reason `timeout`")
      .number("start_seconds", &O::start_seconds, 1.0, 3600.0, "seconds",
              "openenv: a started server's `/health` must answer within it (a `url` server's, likewise)")
      .integer("max_context_tokens", &O::max_context_tokens, 0, 1 << 24, "tokens",
               "openenv: an episode past it ends truncated", "0 = the model's max_seq_len")
      .integer("observation_bytes", &O::observation_bytes, 16, 1 << 24, "bytes",
               "openenv: of an observation shown to the policy (the rest cut, said so)")
      .custom("stop", "list of strings", "none", "text",
              "openenv: text that also ends a policy turn, beside the template's end of turn",
              [](YamlReader& r, O& o) { readList(r, "stop", o.stop); })
      .custom("demonstrations", "string", "empty", "a JSONL file",
              "openenv: the warm start's games (`astraflow sft`): one row per game, `{\"seed\": 3, \"actions\": "
              "[\"8\", \"12\"]}` — the turns are played against the server and trained on; seeds must be "
              "training seeds (below `eval_seed_start`); bad rows are skipped and counted in one warning, a "
              "file without a usable row is an error. Empty: `astraflow sft` refuses (an OpenEnv server knows "
              "no solutions); `env check` plays them when set",
              [](YamlReader& r, O& o) {
                const std::string file = r.getString("demonstrations", "");
                if (!file.empty()) o.demonstrations = absolutePath(r, "demonstrations", file);
              });
}

}  // namespace

const SectionSchema<OpenEnvOptions>& openEnvSchema() {
  static const auto schema = [] {
    SectionSchema<O> s("environment.openenv");
    openEnvServerKeys(s);
    openEnvEpisodeKeys(s);
    s.rule("port_argument", "a `command` has a `{port}` argument (the rank picks a free port)",
           [](YamlReader& r, const O& o) {
             if (!o.command.empty() && std::none_of(o.command.begin(), o.command.end(), [](const std::string& a) {
                   return a.find("{port}") != std::string::npos;
                 }))
               r.fail("command",
                      "has no {port} argument: the rank picks a free port and the server must listen on it "
                      "(e.g. [python3, server.py, --port, \"{port}\"])");
           })
        .rule("server_per_command", "`server_per` only with `command` (a `url` server is started by whoever runs it)",
              [](YamlReader& r, const O& o) {
                if (o.command.empty() && r.has("server_per"))
                  r.fail("server_per", "belongs to command: a url server is started by whoever runs it");
              })
        .rule("action_field", "`action_field` is not empty, and is not given with `interface: mcp`",
              [](YamlReader& r, const O& o) {
                if (o.action_field.empty())
                  r.fail("action_field", "is empty; name the action's text field (default: message)");
                if (o.interface == OpenEnvInterface::Mcp && r.has("action_field"))
                  r.fail("action_field",
                         "belongs to interface: text; with interface: mcp a turn's tool calls are the actions");
              });
    return s;
  }();
  return schema;
}

namespace {

// The keys of the dataset environments (dataset, code_interpreter, doc_search): the dataset's
// own, and the sections only they read; openenv takes the chat keys and `tools` of them.
const std::vector<std::string>& datasetEnvironmentKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = datasetSchema().keyNames();
    k.insert(k.end(), {"reward", "tool", "tools"});
    return k;
  }();
  return keys;
}
bool isChatKey(const std::string& key) { return key == "system_prompt" || key == "enable_thinking" || key == "tools"; }

// Checked right after `name`, before the other keys are read: a key that does not go with the
// environment is refused as such, not for what it holds.
void refuseForeignKeys(YamlReader& r, const EnvironmentOptions& e) {
  if (!usesPromptDataset(e.name)) {
    for (const auto& key : datasetEnvironmentKeys()) {
      if (!r.has(key) || (e.name == "openenv" && isChatKey(key))) continue;
      if (e.name == "openenv")
        r.fail(key, "belongs to the dataset environments; an openenv episode's reward is the server's");
      r.fail(key, fmt::format("belongs to the dataset environments (dataset, code_interpreter, doc_search); "
                              "environment.name is '{}'",
                              e.name));
    }
  } else if (e.name == "dataset") {
    if (r.has("tool"))
      r.fail("tool", "belongs to the tool environments (code_interpreter, doc_search); environment.name is 'dataset'");
  } else {
    YamlReader tool = r.child("tool");
    const bool code = e.name == "code_interpreter";
    for (const char* key : {"interpreter", "wall_seconds", "memory_mb"})
      if (!code && tool.has(key))
        tool.fail(key, fmt::format("belongs to code_interpreter; environment.name is '{}'", e.name));
    for (const char* key : {"corpus", "top_k", "document_bytes"})
      if (code && tool.has(key)) tool.fail(key, "belongs to doc_search; environment.name is 'code_interpreter'");
  }
  if (e.name != "openenv" && r.has("openenv"))
    r.fail("openenv", fmt::format("belongs to environment.name: openenv, not '{}'", e.name));
}

// After every key: what the environment needs.
void requireEnvironmentKeys(YamlReader& r, const EnvironmentOptions& e) {
  if (usesPromptDataset(e.name) && !r.has("train"))
    r.fail("train", fmt::format("is required with environment.name: {} (one or more JSONL files of rows)", e.name));
  if (e.name == "doc_search" && e.tool.corpus.empty())
    r.child("tool").fail("corpus", "is required with doc_search: a JSONL file of {\"text\", \"title\", \"id\"}");
  if (e.name == "openenv") {
    if (!r.has("openenv")) r.fail("openenv", "is required with environment.name: openenv (url or command, ...)");
    YamlReader o = r.child("openenv");
    checkUrlOrCommand(o, e.openenv.url, e.openenv.command, "http://host:port, a running server",
                      "a server each rollout rank starts; {port} in an argument is the port it picks");
  }
}

}  // namespace

const SectionSchema<EnvironmentOptions>& environmentSchema() {
  using E = EnvironmentOptions;
  static const auto schema = [] {
    std::string names;
    for (const auto& n : registeredEnvironmentNames()) names += (names.empty() ? "`" : ", `") + n + "`";
    return SectionSchema<E>("environment")
        .custom("name", "string", "`arithmetic`", "a registered environment: " + names,
                "`dataset`: prompts from JSONL files, one turn; `code_interpreter`, `doc_search`: the same with a "
                "tool the policy may call over several turns; `openenv`: episodes played on an OpenEnv server "
                "(docs/tasks.md)",
                [](YamlReader& r, E& e) { e.name = r.getChoice("name", e.name, registeredEnvironmentNames()); })
        .rule("environment_keys",
              "`train` … `tools` belong to the dataset environments (`dataset`, `code_interpreter`, `doc_search`; "
              "`openenv` takes `system_prompt`, `enable_thinking` and `tools` of them), `tool` to "
              "`code_interpreter` (its `interpreter`, `wall_seconds`, `memory_mb`) and `doc_search` (its "
              "`corpus`, `top_k`, `document_bytes`), `openenv` to `name: openenv`; checked before they are read",
              refuseForeignKeys)
        .integer("digits", &E::digits, 1, 6, "digits", "arithmetic: operands have 1..digits digits")
        .text("operators", &E::operators, "characters of `+-*`", "arithmetic: operators drawn from")
        .integer("corpus_size", &E::corpus_size, 4, 10000, "facts", "search: size of the generated key–value corpus")
        .integer("max_turns", &E::max_turns, 1, 16, "turns",
                 "search: agent turns before the episode ends unsolved; code_interpreter, doc_search: turns, the "
                 "last one scored as the answer; openenv: steps before the episode ends truncated (reward 0) unless "
                 "the server said `done`")
        .integer("corpus_seed", &E::corpus_seed, 0, std::numeric_limits<std::int64_t>::max(), "",
                 "search: the corpus is a function of this seed")
        .merged(&E::dataset, datasetSchema())
        .nested("reward", &E::reward, rewardSchema())
        .nested("tool", &E::tool, toolSchema())
        .custom("tools", "mapping", "none",
                "`{mcp: [{name, command \\| url, env, timeout_seconds}]}`: `name` unique; `command`: the server "
                "program and its arguments (a list), started per rollout rank over stdio; or `url`: a running "
                "server's streamable HTTP endpoint, `http://host:port/mcp`; `env`: a mapping added to the host's "
                "environment (command); `timeout_seconds`: 0.1–3600, default 30 (start-up and each call)",
                "dataset, code_interpreter, doc_search, openenv: MCP servers whose tools the policy may call "
                "(docs/tasks.md, \"Tools from MCP servers\")",
                [](YamlReader& r, E& e) {
                  if (r.has("tools")) readTools(r.child("tools"), e);
                })
        .nested("openenv", &E::openenv, openEnvSchema())
        .rule("operators", "`operators` is a non-empty string of `+ - *`",
              [](YamlReader& r, const E& e) {
                if (e.operators.empty() || e.operators.find_first_not_of("+-*") != std::string::npos)
                  r.fail("operators", "given '" + e.operators + "'; allowed: a non-empty string of + - *");
              })
        .rule("environment_needs",
              "the dataset environments need `train`, `doc_search` its `tool.corpus`, `openenv` its `openenv` "
              "with one of `url` (`http://`) and `command`",
              requireEnvironmentKeys);
  }();
  return schema;
}

}  // namespace astraflow::detail
