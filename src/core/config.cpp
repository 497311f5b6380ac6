// The run config: YAML (and --set overrides) parsed into the typed sections of config.hpp, each
// key checked with its bounds, and errors that name the key, the value and what is allowed.
#include "astraflow/core/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/dataflow_config.hpp"
#include "core/environment_config.hpp"
#include "core/layout_config.hpp"
#include "core/section_schemas.hpp"
#include "core/simulation_config.hpp"
#include "core/workflow_config.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow {

using detail::YamlReader;

const char* roleName(Role role) { return enumName(kRoleNames, role); }

int Config::layoutRanks() const {
  int n = 0;
  for (const auto& e : layout) n += e.ranks;
  return n;
}

bool Config::isGatewaySite() const {
  return std::any_of(layout.begin(), layout.end(), [](const LayoutEntry& e) { return e.role == Role::Gateway; });
}

const PolicySection* Config::findPolicy(const std::string& name) const {
  for (const auto& p : policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace {

// cross_site's keys (section_schemas.cpp), then what depends on the layout: a gateway site's
// job connects home and does not listen; a home job does not connect.
void parseCrossSite(YamlReader r, Config& cfg) {
  detail::crossSiteSchema().read(r, cfg.cross_site);
  const auto& c = cfg.cross_site;
  if (cfg.isGatewaySite() && c.connect.empty()) {
    r.fail("connect", "missing; a layout with a gateway needs cross_site.connect: <home host>:<port>");
  }
  if (!cfg.isGatewaySite() && !c.connect.empty()) {
    r.fail("connect", "set, but the layout has no gateway entry; allowed: only in a remote site's job");
  }
  if (cfg.isGatewaySite() && !c.listen.empty()) {
    r.fail("listen", "set in a gateway site's job; allowed: only at the home site (its dataflow rank listens)");
  }
}

std::vector<PolicySection> parsePolicies(YamlReader& top, const std::string& source) {
  std::vector<PolicySection> out;
  const auto nodes = top.requireSequence("policies");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    YamlReader r(nodes[i], fmt::format("policies[{}]", i), source);
    PolicySection p;
    p.line = r.line();
    detail::policySchema().read(r, p);
    for (const auto& q : out) {
      if (q.name == p.name) {
        r.fail("name", fmt::format("policy '{}' is defined twice (first at line {})", p.name, q.line));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

namespace {

// Sets root[a][b]... = value for one "a.b=value" override; intermediate maps are created. A list
// entry is reached by its index as a key (layout.2.ranks) or as the messages write it
// (layout[2].ranks, policies[0].model.hf).
void applyOverride(YAML::Node& root, const std::string& setting, const std::string& source_name) {
  const auto eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(
        fmt::format("{}: --set '{}': expected key.path=value (e.g. run.versions=4)", source_name, setting));
  }
  std::vector<std::string> keys;
  std::stringstream path(setting.substr(0, eq));
  for (std::string key; std::getline(path, key, '.');) {
    // name[i][j] -> name, i, j
    std::string::size_type open = key.find('[');
    const std::string name = key.substr(0, open);
    if (!name.empty()) keys.push_back(name);
    while (open != std::string::npos) {
      const auto close = key.find(']', open);
      const std::string index = close == std::string::npos ? "" : key.substr(open + 1, close - open - 1);
      if (index.empty() || (close + 1 < key.size() && key[close + 1] != '[')) {
        throw ConfigError(fmt::format("{}: --set '{}': '{}' is not key or key[index]", source_name, setting, key));
      }
      keys.push_back(index);
      open = close + 1 < key.size() ? close + 1 : std::string::npos;
    }
    if (name.empty() && (key.empty() || key.front() != '['))
      throw ConfigError(fmt::format("{}: --set '{}': empty key in the path", source_name, setting));
  }
  YAML::Node value;
  try {
    value = YAML::Load(setting.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: --set '{}': malformed value: {}", source_name, setting, e.msg));
  }
  // A key that is a number indexes a list (layout.2.backend): the entry must exist.
  auto child = [&](YAML::Node& node, const std::string& key) -> YAML::Node {
    if (node.IsSequence()) {
      const bool numeric =
          !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isdigit(c); });
      if (!numeric || std::stoul(key) >= node.size()) {
        throw ConfigError(fmt::format("{}: --set '{}': '{}' is not an index of a list of {} entries", source_name,
                                      setting, key, node.size()));
      }
      return node[std::stoul(key)];
    }
    return node[key];
  };
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next = child(chain.back(), keys[i]);
    if (next.IsDefined() && !next.IsNull() && !next.IsMap() && !next.IsSequence()) {
      throw ConfigError(fmt::format("{}: --set '{}': '{}' is not a section", source_name, setting, keys[i]));
    }
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[keys[i]];
    }
    chain.push_back(next);
  }
  if (chain.back().IsSequence()) {
    YAML::Node entry = child(chain.back(), keys.back());
    entry = value;
  } else {
    chain.back()[keys.back()] = value;
  }
}

}  // namespace

Config parseConfig(const std::string& yaml_text, const std::string& source_name,
                   const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}:{}: malformed YAML: {}", source_name, e.mark.line + 1, e.msg));
  }
  Config cfg;
  cfg.source = source_name;
  if (!root || root.IsNull())
    throw ConfigError(source_name +
                      ": the config is empty; it needs at least "
                      "`policies` and `layout`");
  cfg.text = yaml_text;
  if (!overrides.empty()) {
    for (const auto& setting : overrides) applyOverride(root, setting, source_name);
    YAML::Emitter out;
    out << root;
    cfg.text = out.c_str();
  }
  YamlReader top(root, "", cfg.source);
  detail::runSchema().read(top.child("run"), cfg.run);
  cfg.policies = parsePolicies(top, cfg.source);
  cfg.layout = parseLayout(top, cfg.policies, cfg.source);
  detail::parseDataflow(top.child("dataflow"), cfg.dataflow);
  detail::parseEnvironment(top.child("environment"), cfg);
  parseWorkflow(top.child("workflow"), cfg);
  // Sync mode trains each batch on one version: its sequences finish under it by default.
  cfg.rollout.on_new_version = cfg.run.mode == RunMode::Sync ? OnNewVersion::Finish : OnNewVersion::Continue;
  detail::rolloutSchema().read(top.child("rollout"), cfg.rollout);
  detail::trainerSchema().read(top.child("trainer"), cfg.trainer);
  detail::checkSimulation(cfg);
  detail::sftSchema().read(top.child("sft"), cfg.sft);
  detail::evalSchema().read(top.child("eval"), cfg.eval);
  cfg.environment.dataset.eval_sets = cfg.eval.sets;  // every rank's environment loads the sets' rows
  detail::checkEnvironment(cfg);
  detail::weightsSchema().read(top.child("weights"), cfg.weights);
  parseCrossSite(top.child("cross_site"), cfg);
  detail::elasticSchema().read(top.child("elastic"), cfg.elastic);
  // Spawned ranks take the first rollout pool's backend (src/dataflow/pool_view.hpp): a pool of
  // servers someone else runs cannot grow that way (spawned ranks would share its servers), one
  // that launches its own can (each spawned rank starts its servers, and stops them when retired).
  const auto first_pool =
      std::find_if(cfg.layout.begin(), cfg.layout.end(), [](const LayoutEntry& e) { return e.role == Role::Rollout; });
  if (cfg.elastic.mode != ElasticMode::Off && first_pool != cfg.layout.end() && first_pool->backend.http() &&
      !first_pool->backend.launch.enabled()) {
    throw ConfigError(
        fmt::format("{}: elastic.mode: given {} with an http rollout pool ({}) of running servers; allowed: off, or "
                    "servers the pool starts (backend.launch: each spawned rank starts its own)",
                    cfg.source, enumName(kElasticModeNames, cfg.elastic.mode), first_pool->pool));
  }
  detail::localSchema().read(top.child("local"), cfg.local);
  if (cfg.sft.checkpoint.empty()) cfg.sft.checkpoint = cfg.run.output_dir + "/sft.h5";
  top.finish();
  return cfg;
}

Config loadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot open the config file", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the config file", path));
  return parseConfig(text.str(), path, overrides);
}

}  // namespace astraflow
