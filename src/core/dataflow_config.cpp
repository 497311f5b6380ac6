// parseDataflow: the `dataflow` config section (task, trajectory and batch rings, staleness, prompt pool, and the
// curator, filter, sampler and router plug-ins, whose kinds the dataflow module's registered check vets).
#include "core/dataflow_config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "astraflow/core/config_checks.hpp"

namespace astraflow::detail {

namespace {

void parseRing(YamlReader r, RingSection& ring) {
  ring.slots =
      static_cast<std::uint64_t>(r.getInt("slots", static_cast<std::int64_t>(ring.slots), 2, 1 << 24, "slots"));
  ring.slot_bytes = static_cast<std::uint64_t>(
      r.getInt("slot_bytes", static_cast<std::int64_t>(ring.slot_bytes), 16, 1ll << 30, "bytes"));
  if (ring.slot_bytes % 8 != 0) {
    r.fail("slot_bytes", fmt::format("given {}; allowed: a multiple of 8 bytes", ring.slot_bytes));
  }
  r.finish();
}

// One plug-in: a name (`zero_advantage`) or a mapping with `kind` and scalar parameters
// (`{kind: replay, ratio: 0.3}`). The kind and parameters are checked by the plug-in's factory.
PluginSpec parsePluginSpec(YamlReader& r, const YAML::Node& node, const std::string& key_path) {
  PluginSpec spec;
  spec.key = key_path;
  const int line = node.Mark().line + 1;
  if (node.IsScalar()) {
    spec.kind = node.Scalar();
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string k = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) {
        r.failAt(line, key_path + "." + k, "given " + detail::describe(kv.second) + "; allowed: a number or a name");
      }
      if (k == "kind") {
        spec.kind = kv.second.Scalar();
      } else {
        spec.params[k] = kv.second.Scalar();
      }
    }
    if (spec.kind.empty()) r.failAt(line, key_path + ".kind", "missing; every plug-in mapping needs a kind");
  } else {
    r.failAt(line, key_path,
             "given " + detail::describe(node) + "; allowed: a plug-in name or {kind: name, parameters...}");
  }
  return spec;
}

}  // namespace

void parseDataflow(YamlReader r, DataflowSection& df) {
  parseRing(r.child("task_ring"), df.task_ring);
  parseRing(r.child("trajectory_ring"), df.trajectory_ring);
  parseRing(r.child("batch_ring"), df.batch_ring);
  df.max_staleness = static_cast<int>(r.getInt("max_staleness", df.max_staleness, 0, 1000, "versions"));
  df.prompt_pool = static_cast<std::uint64_t>(r.getInt("prompt_pool", 0, 0, std::int64_t{1} << 40, "prompts"));
  for (const char* list : {"curators", "filters"}) {
    const auto node = r.raw(list);
    if (!node) continue;
    if (!node->IsSequence()) r.fail(list, "given " + detail::describe(*node) + "; allowed: a list of plug-ins");
    auto& out = std::string(list) == "curators" ? df.curators : df.filters;
    out.clear();
    for (std::size_t i = 0; i < node->size(); ++i) {
      out.push_back(parsePluginSpec(r, (*node)[i], fmt::format("{}[{}]", r.keyPath(list), i)));
    }
  }
  if (auto node = r.raw("sampler")) df.sampler = parsePluginSpec(r, *node, r.keyPath("sampler"));
  if (auto node = r.raw("router")) {
    df.router = parsePluginSpec(r, *node, r.keyPath("router"));
    df.router_given = true;
  }
  r.finish();
  // Each factory checks its kind and parameters (ConfigError naming the key).
  const auto& check = configChecks().dataflow_plugins;
  if (!check) throw std::logic_error("config: no data-algorithm plug-ins are registered (link the astraflow target)");
  try {
    check(df);
  } catch (const ConfigError& e) {
    throw ConfigError(r.source() + ": " + e.what());
  }
}

}  // namespace astraflow::detail
