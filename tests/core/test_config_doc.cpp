// The config schema (src/core/section_schemas.cpp) against docs/configuration.md: the doc in the
// repository holds exactly the tables the schema generates; every documented key of a declared
// section is read by the parser, with its documented default a value the parser takes and its
// documented bounds the ones it enforces; the doc's generated regions are checked for.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/config_doc.hpp"
#include "astraflow/core/error.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

const std::string kDocPolicies = "policies:\n  - name: solver\n";
const std::string kDocLayout =
    "layout:\n  - {role: dataflow, ranks: 1}\n  - {role: trainer, policy: solver}\n"
    "  - {role: rollout, policies: [solver]}\n";

// A whole config around one section's YAML (which may be the policies themselves).
std::string docConfig(const std::string& section) {
  return (section.rfind("policies:", 0) == 0 ? "" : kDocPolicies) + kDocLayout + section;
}

// "a.b.c" = VALUE as nested YAML, each level indented by `indent` more than `base`.
std::string nestedYaml(const std::string& key, const std::string& value, std::string indent) {
  std::string yaml;
  std::size_t at = 0;
  for (auto dot = key.find('.'); dot != std::string::npos; at = dot + 1, dot = key.find('.', at)) {
    yaml += indent + key.substr(at, dot - at) + ":\n";
    indent += "  ";
  }
  return yaml + indent + key.substr(at) + ": " + value + "\n";
}

// "trainer.loss.kind" -> "trainer:\n  loss:\n    kind: VALUE\n"; a key of a policy
// ("policies[i].model.layers") goes into the one policy.
std::string sectionYaml(const std::string& key, const std::string& value) {
  const std::string policy = "policies[i].";
  if (key.rfind(policy, 0) == 0) {
    const std::string rest = key.substr(policy.size());
    if (rest == "name") return "policies:\n  - name: " + value + "\n";
    return "policies:\n  - name: solver\n" + nestedYaml(rest, value, "    ");
  }
  return nestedYaml(key, value, "");
}

// A Hugging Face folder for the environments that encode with the policy's tokenizer: its
// config.json is all that reading the config opens.
const std::string& hfFolder() {
  static const test::TempDir dir;
  static const std::string path = [] {
    std::ofstream(dir.file("config.json"))
        << R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 32, "num_hidden_layers": 1,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64,
               "vocab_size": 50})";
    return dir.path().string();
  }();
  return path;
}

// Where a key applies only with other settings (an environment's keys), the config it is tried
// in; the first prefix that matches. HF stands for hfFolder().
struct KeyContext {
  const char* prefix;
  const char* yaml;
};
constexpr const char* kDatasetEnv =
    "policies: [{name: solver, model: {hf: HF}}]\nenvironment: {name: dataset, train: [rows.jsonl]}\n"
    "eval: {problems: 0}\n";
constexpr const char* kCodeEnv =
    "policies: [{name: solver, model: {hf: HF}}]\nenvironment: {name: code_interpreter, train: [rows.jsonl]}\n"
    "eval: {problems: 0}\n";
constexpr const char* kSearchEnv =
    "policies: [{name: solver, model: {hf: HF}}]\n"
    "environment: {name: doc_search, train: [rows.jsonl], tool: {corpus: docs.jsonl}}\neval: {problems: 0}\n";
constexpr const char* kOpenEnvUrl =
    "policies: [{name: solver, model: {hf: HF}}]\nenvironment: {name: openenv, openenv: {url: 'http://127.0.0.1:9'}}\n";
constexpr const char* kOpenEnvCommand =
    "policies: [{name: solver, model: {hf: HF}}]\n"
    "environment: {name: openenv, openenv: {command: [server, '{port}']}}\n";
// A team of two policies, each with its trainer, served by one rollout entry.
constexpr const char* kTeam =
    "policies: [{name: solver}, {name: verifier}]\n"
    "layout: [{role: dataflow, ranks: 1}, {role: trainer, policy: solver}, {role: trainer, policy: verifier},\n"
    "         {role: rollout, policies: [solver, verifier]}]\n"
    "workflow: {kind: solver_verifier, roles: {solver: solver, verifier: verifier}, max_rounds: 2}\n";
// A key tried in docConfig's own config (no context).
constexpr const char* kNoContext = nullptr;
const KeyContext kContexts[] = {
    {"workflow.kind", kNoContext},
    {"workflow.", kTeam},
    {"environment.tool.corpus", kSearchEnv},
    {"environment.tool.top_k", kSearchEnv},
    {"environment.tool.document_bytes", kSearchEnv},
    {"environment.tool.", kCodeEnv},
    {"environment.openenv.server_per", kOpenEnvCommand},
    {"environment.openenv.", kOpenEnvUrl},
    {"environment.reward.", kDatasetEnv},
    {"environment.eval_fraction", kDatasetEnv},
    {"environment.max_prompt_bytes", kDatasetEnv},
    {"environment.max_prompt_tokens", kDatasetEnv},
    {"environment.columns", kDatasetEnv},
    {"environment.prompt_rewrite.", kDatasetEnv},
    {"environment.system_prompt", kDatasetEnv},
    {"environment.solution_field", kDatasetEnv},
    {"environment.enable_thinking", kDatasetEnv},
};

// `b`'s keys set into `a`, mappings merged key by key.
void mergeInto(YAML::Node a, const YAML::Node& b) {
  for (const auto& kv : b) {
    const std::string key = kv.first.Scalar();
    if (a[key] && a[key].IsMap() && kv.second.IsMap())
      mergeInto(a[key], kv.second);
    else
      a[key] = kv.second;
  }
}

// A layout entry's key ("layout[i].ranks", "layout[i].backend.retries") is tried in a layout whose
// first entry, layout[0], is the rollout pool; a backend key with a backend of the kind the key
// belongs to (its meaning says which: "simulated: …"; `launch` keys with a launch command).
bool simulatedKey(const std::string& key) {
  for (const auto& section : configSchemaDocs())
    for (const auto& k : section.keys)
      if (k.key == key) return k.meaning.rfind("simulated:", 0) == 0;
  return false;
}

std::string backendConfig(const std::string& key, const std::string& value) {
  const std::string rest = key.substr(std::string("layout[i].").size());
  const std::string name = rest.substr(rest.rfind('.') + 1);
  const bool simulated = simulatedKey(key);
  YAML::Node root = YAML::Load(kDocPolicies +
                               "layout:\n  - {role: rollout, policies: [solver]}\n  - {role: dataflow, ranks: 1}\n"
                               "  - {role: trainer, policy: solver}\n");
  // A launch key with servers the pool starts (launch refuses url); the others with a url server.
  const char* http = rest.rfind("backend.launch.", 0) == 0 ? "{kind: http, launch: {command: [server]}}"
                                                           : "{kind: http, url: 'http://127.0.0.1:9'}";
  if (rest.rfind("backend.", 0) == 0 && name != "kind")
    root["layout"][0]["backend"] = YAML::Load(simulated ? "{kind: simulated}" : http);
  mergeInto(root["layout"][0], YAML::Load(nestedYaml(rest, value, "")));
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// The config `section` (YAML) is tried in: docConfig's, with the key's context set over it.
std::string contextConfig(const std::string& key, const std::string& section) {
  const KeyContext* context = nullptr;
  for (const auto& c : kContexts)
    if (key.rfind(c.prefix, 0) == 0 && !context) context = &c;
  if (!context || !context->yaml) return docConfig(section);
  std::string yaml = context->yaml;
  if (const auto hf = yaml.find("HF"); hf != std::string::npos) yaml.replace(hf, 2, hfFolder());
  YAML::Node root = YAML::Load(kDocPolicies + kDocLayout);
  mergeInto(root, YAML::Load(yaml));
  mergeInto(root, YAML::Load(section));
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A list of names, `a\|b\|c` (not a pattern, nor a form such as cuda:N).
bool namesOnly(const std::string& allowed) {
  if (allowed.size() < 3 || allowed.front() != '`' || allowed.back() != '`') return false;
  const std::string inner = allowed.substr(1, allowed.size() - 2);
  if (inner.find("\\|") == std::string::npos) return false;
  for (std::size_t i = 0; i < inner.size(); ++i) {
    const char c = inner[i];
    if (c == '\\' && i + 1 < inner.size() && inner[i + 1] == '|') {
      ++i;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The message parsing `config` gives ("" when it is taken).
std::string parseError(const std::string& config) {
  try {
    parseConfig(config, "doc.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A list's `[i]` as the one element, `[0]`, as messages name it.
std::string named(std::string key) {
  if (const auto at = key.find("[i]"); at != std::string::npos) key.replace(at, 3, "[0]");
  return key;
}

// The config is refused with an error naming `key`.
bool refused(const std::string& yaml, const std::string& key) {
  return parseError(docConfig(yaml)).find(named(key)) != std::string::npos;
}

// `key: value` in the key's context (contextConfig): taken, and refused naming the key.
std::string errorWith(const std::string& key, const std::string& value) {
  if (key.rfind("layout[i].", 0) == 0) return parseError(backendConfig(key, value));
  return parseError(contextConfig(key, sectionYaml(key, value)));
}
bool refusedWith(const std::string& key, const std::string& value) {
  return errorWith(key, value).find(named(key)) != std::string::npos;
}

}  // namespace

TEST(ConfigDoc, TheReferenceInTheRepositoryIsWhatTheSchemaGenerates) {
  const char* root = std::getenv("ASTRAFLOW_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "ctest sets ASTRAFLOW_SOURCE_DIR";
  const std::string path = std::string(root) + "/docs/configuration.md";
  const std::string doc = readFile(path);
  ASSERT_FALSE(doc.empty()) << path;
  const std::string generated = regenerateConfigDoc(doc);
  if (generated == doc) return;
  // The first line that differs, not the whole file.
  std::size_t at = 0, line = 1;
  while (at < doc.size() && at < generated.size() && doc[at] == generated[at]) line += doc[at++] == '\n';
  const auto lineOf = [&](const std::string& text) {
    const auto start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const auto from = start == std::string::npos || at == 0 ? 0 : start + 1;
    return text.substr(from, text.find('\n', from) - from);
  };
  ADD_FAILURE() << path << ":" << line << " differs from what the schema generates:\n  file:      " << lineOf(doc)
                << "\n  generated: " << lineOf(generated)
                << "\nrun: build/bin/astraflow config-doc --write docs/configuration.md";
}

TEST(ConfigDoc, EveryDocumentedKeyIsReadWithItsDefaultAndBounds) {
  for (const auto& section : configSchemaDocs()) {
    ASSERT_FALSE(section.keys.empty()) << section.name;
    for (const auto& k : section.keys) {
      // The default as documented, when it is one literal (`16`; not `<output_dir>/sft.h5`, nor
      // one per run mode).
      const auto& d = k.default_value;
      const bool literal =
          d.size() > 2 && d.front() == '`' && d.back() == '`' && d[1] != '<' && d.find('`', 1) == d.size() - 1;
      const std::string value = literal ? d.substr(1, d.size() - 2) : "";
      if (!value.empty()) {
        EXPECT_EQ(errorWith(k.key, value), "") << k.key;
      }
      // A value of the wrong kind is refused, naming the key: the parser reads this key.
      if (k.type == "integer" || k.type == "number" || k.type == "bool") {
        EXPECT_TRUE(refusedWith(k.key, "not-a-number")) << k.key;
      }
      // A documented lower bound of 1 is enforced just below it.
      const bool from_one = k.allowed.find("≥ 1") != std::string::npos || k.allowed.find(" 1–") != std::string::npos ||
                            k.allowed.rfind("1–", 0) == 0;
      if (k.type == "integer" && from_one) {
        EXPECT_TRUE(refusedWith(k.key, "0")) << k.key << " allows " << k.allowed;
      }
    }
  }
}

// Each integer's and number's documented bounds are the parser's: just outside either one is
// refused, naming the key.
TEST(ConfigDoc, DocumentedBoundsAreEnforced) {
  int checked = 0;
  for (const auto& section : configSchemaDocs()) {
    for (const auto& k : section.keys) {
      if (k.min.empty()) continue;
      ASSERT_FALSE(k.max.empty()) << k.key;
      std::string below, above;
      if (k.type == "integer") {
        const long long min = std::stoll(k.min), max = std::stoll(k.max);
        below = std::to_string(min - 1);
        if (max < std::numeric_limits<long long>::max()) above = std::to_string(max + 1);
      } else {
        const double min = std::stod(k.min), max = std::stod(k.max);
        below = fmt::format("{}", min - std::max(std::abs(min) * 1e-3, 1e-9));
        above = fmt::format("{}", max + std::max(std::abs(max) * 1e-3, 1e-9));
      }
      EXPECT_TRUE(refusedWith(k.key, below)) << k.key << " = " << below << " (min " << k.min << ")";
      if (!above.empty()) {
        EXPECT_TRUE(refusedWith(k.key, above)) << k.key << " = " << above << " (max " << k.max << ")";
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

// The choices that need another key beside them: that key.
static std::string neededBeside(const std::string& key, const std::string& name) {
  struct Needs {
    const char *key, *name, *needs;
  };
  static const Needs needs[] = {{"environment.reward.kind", "regex", "environment.reward.pattern"},
                                {"environment.reward.kind", "command", "environment.reward.command"},
                                {"environment.reward.kind", "http", "environment.reward.url"},
                                {"layout[i].backend.kind", "http", "layout[i].backend.url"},
                                {"workflow.kind", "solver_verifier", "workflow.roles"},
                                {"workflow.kind", "solver_selector", "workflow.roles"},
                                {"workflow.kind", "solver_testgen", "environment.name"}};
  for (const auto& n : needs)
    if (key == n.key && name == n.name) return n.needs;
  return "";
}

TEST(ConfigDoc, ChoicesListTheNamesTheParserTakes) {
  bool seen = false;
  for (const auto& section : configSchemaDocs()) {
    for (const auto& k : section.keys) {
      if (k.type != "string" || !namesOnly(k.allowed)) continue;
      seen = true;
      std::string names = k.allowed.substr(1, k.allowed.size() - 2);
      for (std::size_t at = 0; at <= names.size();) {
        const auto bar = names.find("\\|", at);
        const std::string name = names.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
        // Taken; or, where the choice needs another key, refused naming that key.
        const std::string error = errorWith(k.key, name), needs = neededBeside(k.key, name);
        if (needs.empty())
          EXPECT_EQ(error, "") << k.key << ": " << name;
        else
          EXPECT_NE(error.find(named(needs)), std::string::npos) << k.key << ": " << name << " needs " << needs;
        if (bar == std::string::npos) break;
        at = bar + 2;
      }
      EXPECT_TRUE(refusedWith(k.key, "no_such_choice")) << k.key;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(ConfigDoc, CrossKeyChecksAreDocumentedAndEnforced) {
  // elastic's dead band: tau_low above tau_high is refused, naming tau_low.
  EXPECT_TRUE(refused("elastic: {tau_low: 0.5, tau_high: 0.2}\n", "elastic.tau_low"));
  EXPECT_TRUE(refused("eval: {samples: 4}\n", "eval.samples"));
  // eval.sets: named sets of a dataset environment, each named once and not `held_out`.
  const std::string dataset = std::string("policies: [{name: solver, model: {hf: ") + hfFolder() +
                              "}}]\nenvironment: {name: dataset, train: [rows.jsonl]}\n";
  EXPECT_EQ(parseError(docConfig(dataset + "eval: {sets: [{name: aime, path: aime.jsonl}]}\n")), "");
  EXPECT_TRUE(refused(dataset + "eval: {sets: [{name: held_out, path: a.jsonl}]}\n", "eval.sets[0].name"));
  EXPECT_TRUE(
      refused(dataset + "eval: {sets: [{name: a, path: a.jsonl}, {name: a, path: b.jsonl}]}\n", "eval.sets[1].name"));
  EXPECT_TRUE(refused(dataset + "eval: {sets: [{name: 'a b', path: a.jsonl}]}\n", "eval.sets[0].name"));
  EXPECT_TRUE(refused(dataset + "eval: {sets: [{name: a}]}\n", "eval.sets[0].path"));
  EXPECT_TRUE(refused(dataset + "eval: {sets: [{name: a, path: a.jsonl, samples: 4}]}\n", "eval.sets"));
  EXPECT_TRUE(refused(dataset + "eval: {sets: [{name: a, path: a.jsonl, typo: 1}]}\n", "eval.sets[0].typo"));
  EXPECT_TRUE(refused("eval: {sets: [{name: a, path: a.jsonl}]}\n", "eval.sets"));  // arithmetic: no rows
  // run.keep_best: evaluation rounds at checkpointed versions.
  EXPECT_TRUE(refused("run: {keep_best: true}\n", "run.keep_best"));
  EXPECT_TRUE(refused("run: {keep_best: true, checkpoint_every: 3}\neval: {every: 10}\n", "run.keep_best"));
  EXPECT_TRUE(refused("run: {keep_best: true, checkpoint_every: 5}\neval: {problems: 0}\n", "run.keep_best"));
  EXPECT_EQ(parseError(docConfig("run: {keep_best: true, checkpoint_every: 5}\neval: {every: 10}\n")), "");
  bool documented = false;
  for (const auto& section : configSchemaDocs()) {
    for (const auto& r : section.rules) documented |= r.name == "dead_band";
  }
  EXPECT_TRUE(documented);
}

TEST(ConfigDoc, RegionsAreCheckedFor) {
  // A declared section without its region, and a region no schema declares, are errors.
  EXPECT_THROW(regenerateConfigDoc("# nothing generated here\n"), Error);
  std::string all;
  for (const auto& s : configSchemaDocs()) all += "<!-- schema: " + s.name + " -->\n<!-- /schema -->\n";
  EXPECT_NO_THROW(regenerateConfigDoc(all));
  EXPECT_THROW(regenerateConfigDoc(all + "<!-- schema: nonsense -->\n<!-- /schema -->\n"), Error);
  EXPECT_THROW(regenerateConfigDoc("<!-- schema: weights -->\n"), Error);                          // never closed
  EXPECT_THROW(regenerateConfigDoc(all + "<!-- schema: weights -->\n<!-- /schema -->\n"), Error);  // twice
  EXPECT_THROW(regenerateConfigDoc("<!-- schema: weights -->\n<!-- schema: eval -->\n<!-- /schema -->\n"), Error);
  // Markers with trailing blanks (a CRLF file) are markers; other lines keep theirs.
  std::string crlf;
  for (const auto& s : configSchemaDocs()) crlf += "<!-- schema: " + s.name + " -->\r\n<!-- /schema --> \r\n";
  const std::string with_text = crlf + "a line break in markdown  \n";
  const std::string regenerated = regenerateConfigDoc(with_text);
  EXPECT_NE(regenerated.find("`weights.relay_fanout`"), std::string::npos);
  EXPECT_NE(regenerated.find("a line break in markdown  \n"), std::string::npos);
  // The generated text replaces whatever the region held.
  const std::string once = regenerateConfigDoc(all);
  EXPECT_NE(once.find("`weights.relay_fanout`"), std::string::npos);
  EXPECT_EQ(regenerateConfigDoc(once), once);
}
