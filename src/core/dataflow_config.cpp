// parseDataflow: the `dataflow` config section (task, trajectory and batch rings, staleness, prompt pool, and the
// curator, filter, sampler and router plug-ins, whose kinds the dataflow module's registered check vets).
#include "core/dataflow_config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "astraflow/core/config_checks.hpp"

namespace astraflow::detail {

namespace {

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

// curators, filters: lists of plug-ins.
void readPluginList(YamlReader& r, const char* list, std::vector<PluginSpec>& out) {
  const auto node = r.raw(list);
  if (!node) return;
  if (!node->IsSequence()) r.fail(list, "given " + detail::describe(*node) + "; allowed: a list of plug-ins");
  out.clear();
  for (std::size_t i = 0; i < node->size(); ++i)
    out.push_back(parsePluginSpec(r, (*node)[i], fmt::format("{}[{}]", r.keyPath(list), i)));
}

const SectionSchema<RingSection>& ringSchema() {
  static const auto schema =
      SectionSchema<RingSection>("ring")
          .integer("slots", &RingSection::slots, 2, 1 << 24, "slots",
                   "slots of the ring; a record larger than one spans consecutive slots")
          .integer("slot_bytes", &RingSection::slot_bytes, 16, std::int64_t{1} << 30, "bytes", "payload bytes per slot",
                   "a multiple of 8")
          .rule("slot_alignment", "`slot_bytes` is a multiple of 8", [](YamlReader& r, const RingSection& ring) {
            if (ring.slot_bytes % 8 != 0)
              r.fail("slot_bytes", fmt::format("given {}; allowed: a multiple of 8 bytes", ring.slot_bytes));
          });
  return schema;
}

}  // namespace

const SectionSchema<DataflowSection>& dataflowSchema() {
  using D = DataflowSection;
  static const auto schema =
      SectionSchema<D>("dataflow")
          .nested("task_ring", &D::task_ring, ringSchema())
          .nested("trajectory_ring", &D::trajectory_ring, ringSchema())
          .nested("batch_ring", &D::batch_ring, ringSchema())
          .integer("max_staleness", &D::max_staleness, 0, 1000, "versions",
                   "η: a trajectory made with weights v is usable at version V only while V − v ≤ η")
          .integer("prompt_pool", &D::prompt_pool, 0, std::int64_t{1} << 40, "prompts",
                   "0: every prompt is a new training problem; N: epochs over the first N training problems, each "
                   "epoch shuffled (a function of the seed and the cursor, so a resumed run continues it). Curators "
                   "that learn per prompt (GRESO) need N > 0")
          .custom("curators", "list of plug-ins", "`[]`", "`greso`, `curriculum`",
                  "pre-rollout: each prompt must be admitted by every curator, in order",
                  [](YamlReader& r, D& df) { readPluginList(r, "curators", df.curators); })
          .custom("filters", "list of plug-ins", "`[keep_all]`", "`keep_all`, `zero_advantage`",
                  "post-rollout, per complete group, in order; a dropped group's trajectories count as `filtered`",
                  [](YamlReader& r, D& df) { readPluginList(r, "filters", df.filters); })
          .custom("sampler", "plug-in", "`fresh`", "`fresh`, `freshest_first`, `staleness_weighted`, `replay`",
                  "which ready groups form a trainer batch",
                  [](YamlReader& r, D& df) {
                    if (auto node = r.raw("sampler")) df.sampler = parsePluginSpec(r, *node, r.keyPath("sampler"));
                  })
          .custom("router", "plug-in", "`by_policy` (`by_role` with a multi-agent workflow)", "`by_policy`, `by_role`",
                  "which policy's batches a trajectory joins. `by_role` takes `role: policy` parameters (`{kind: "
                  "by_role, solver: solver, verifier: verifier}`); with none it uses `workflow.roles`; a trajectory "
                  "without a role goes to its own policy",
                  [](YamlReader& r, D& df) {
                    if (auto node = r.raw("router")) {
                      df.router = parsePluginSpec(r, *node, r.keyPath("router"));
                      df.router_given = true;
                    }
                  });
  return schema;
}

void parseDataflow(YamlReader r, DataflowSection& df) {
  dataflowSchema().read(r, df);
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
