// The `layout` section: each entry's keys declared once (its role, ranks, a trainer's policy, a
// rollout pool's policies, name and backend — backend_schema.cpp), and the checks that span
// entries (one hub, one trainer entry per policy, every policy trained and served, distinct
// pool names).
#include "core/layout_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/section_schemas.hpp"

namespace astraflow {

using detail::YamlReader;

bool isIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

void requireIdentifier(const YamlReader& r, const std::string& key, const std::string& value) {
  if (!isIdentifier(value)) r.fail(key, "given '" + value + "'; allowed: 1-64 characters of [A-Za-z0-9_-]");
}

namespace {

// Checked right after `role`, before the other keys are read: a trainer's policy, a rollout
// pool's policies, name and backend; a hub (dataflow or gateway) takes none of them.
void refuseOtherRolesKeys(YamlReader& r, const LayoutEntry& e) {
  const auto only = [&](const char* key, Role owner) {
    if (e.role != owner && r.has(key))
      r.fail(key, fmt::format("belongs to {} entries; this entry's role is {}", roleName(owner), roleName(e.role)));
  };
  only("policy", Role::Trainer);
  for (const char* key : {"policies", "pool", "backend"}) only(key, Role::Rollout);
}

// After every key: what the entry's role needs.
void requireRoleKeys(YamlReader& r, const LayoutEntry& e) {
  if (e.role == Role::Trainer && !r.has("policy")) r.fail("policy", "required key is missing (the policy it trains)");
  if (e.role == Role::Rollout && !r.has("policies"))
    r.fail("policies", "required key is missing (the policies the pool serves)");
  if (e.role == Role::Rollout) requireIdentifier(r, "pool", e.pool);
}

}  // namespace

namespace detail {

const SectionSchema<LayoutEntry>& layoutEntrySchema() {
  using L = LayoutEntry;
  static const auto schema =
      SectionSchema<L>("layout[i]")
          .custom("role", "string", "required", namesText(kRoleNames) + " (one dataflow, or gateway, entry per job)",
                  "the entry's ranks' role; a remote site's job has a gateway instead of the dataflow rank "
                  "(docs/cross-site.md)",
                  [](YamlReader& r, L& e) { e.role = r.requireEnum("role", kRoleNames); })
          .rule("role_keys",
                "`policy` is a trainer's, `policies`, `pool` and `backend` a rollout pool's; checked before they "
                "are read",
                refuseOtherRolesKeys)
          .integer("ranks", &L::ranks, 1, 1 << 20, "ranks",
                   "ranks of this entry; the dataflow (or gateway) entry has 1")
          .custom("policy", "string", "required (trainer)", "a defined policy",
                  "trainer: the policy this data-parallel group trains (one entry per policy)",
                  [](YamlReader& r, L& e) { e.policy = r.getString("policy", e.policy); })
          .custom("policies", "list of strings", "required (rollout)", "defined policies",
                  "rollout: the policies this pool serves",
                  [](YamlReader& r, L& e) {
                    if (r.has("policies")) e.policies = r.requireStringList("policies");
                  })
          .text("pool", &L::pool, "`[A-Za-z0-9_-]{1,64}`, unique", "rollout: the pool's name")
          .defaultShown("`pool<i>` (i = the entry's index)")
          .custom("backend", "mapping", "`{kind: engine}`", "`layout[i].backend` (below)",
                  "rollout: how the pool generates: the in-process engine, an external inference server "
                  "(docs/rollout-backends.md), or a simulation (docs/simulation.md)",
                  [](YamlReader& r, L& e) {
                    if (r.has("backend")) backendSchema().read(r.child("backend"), e.backend);
                  })
          .rule("role_needs",
                "a trainer needs `policy`, a rollout pool `policies`; `pool` is 1-64 characters of "
                "`[A-Za-z0-9_-]`",
                requireRoleKeys);
  return schema;
}

}  // namespace detail

namespace {

// The layout, entry by entry, with what spans entries: one hub (dataflow or gateway), one
// trainer entry per policy, distinct pool names, and every policy trained and served.
class LayoutParser {
 public:
  LayoutParser(const std::vector<PolicySection>& policies, std::string source)
      : policies_(policies), source_(std::move(source)) {
    std::vector<std::string> names;
    for (const auto& p : policies) names.push_back(p.name);
    defined_ = fmt::format("{}", fmt::join(names, ", "));
  }

  std::vector<LayoutEntry> parse(YamlReader& top) {
    const auto nodes = top.requireSequence("layout");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      YamlReader r(nodes[i], fmt::format("layout[{}]", i), source_);
      LayoutEntry e;
      e.line = r.line();
      e.pool = fmt::format("pool{}", i);
      detail::layoutEntrySchema().read(r, e);
      if (e.role != Role::Rollout) e.pool.clear();
      switch (e.role) {
        case Role::Dataflow:
        case Role::Gateway: hub(r, e); break;
        case Role::Trainer: trainer(r, e); break;
        case Role::Rollout: rollout(r, e); break;
      }
      out_.push_back(std::move(e));
    }
    checkWhole(top);
    return std::move(out_);
  }

 private:
  void checkPolicy(YamlReader& r, const std::string& key_path, int line, const std::string& name) const {
    for (const auto& p : policies_) {
      if (p.name == name) return;
    }
    r.failAt(line, key_path, fmt::format("'{}' is not a defined policy; allowed: {}", name, defined_));
  }

  // A job has one hub: the dataflow rank (home) or a gateway (a remote site's job).
  void hub(YamlReader& r, const LayoutEntry& e) {
    if (++hub_entries_ > 1) r.fail("role", "a second dataflow or gateway entry; allowed: exactly one of them per job");
    if (e.ranks != 1) {
      r.fail("ranks", fmt::format("given {}; allowed: 1 (one {} rank per job)", e.ranks, roleName(e.role)));
    }
    gateway_ = e.role == Role::Gateway;
  }

  void trainer(YamlReader& r, const LayoutEntry& e) {
    checkPolicy(r, r.keyPath("policy"), r.lineOf("policy"), e.policy);
    if (trainer_line_.count(e.policy)) {
      r.fail("policy", fmt::format("policy '{}' already has a trainer entry (line {}); allowed: one trainer entry "
                                   "per policy (raise its ranks for data parallelism)",
                                   e.policy, trainer_line_[e.policy]));
    }
    trainer_line_[e.policy] = e.line;
  }

  void rollout(YamlReader& r, const LayoutEntry& e) {
    for (std::size_t j = 0; j < e.policies.size(); ++j) {
      checkPolicy(r, fmt::format("{}[{}]", r.keyPath("policies"), j), r.lineOf("policies"), e.policies[j]);
      served_[e.policies[j]]++;
    }
    policyServers(r, e);
    for (const auto& other : out_) {
      if (other.role == Role::Rollout && other.pool == e.pool) {
        r.fail("pool", fmt::format("pool name '{}' is used twice (line {})", e.pool, other.line));
      }
    }
  }

  // backend.policy_urls names policies of this pool; without url/urls it names every one of them.
  static void policyServers(YamlReader& r, const LayoutEntry& e) {
    const auto& b = e.backend;
    const std::string key = r.keyPath("backend") + ".policy_urls";
    for (const auto& [policy, urls] : b.policy_urls)
      if (std::find(e.policies.begin(), e.policies.end(), policy) == e.policies.end())
        r.failAt(r.lineOf("backend"), key,
                 fmt::format("'{}' is not a policy of this pool; allowed: {}", policy, fmt::join(e.policies, ", ")));
    if (!b.http() || !b.urls.empty() || b.launch.enabled()) return;  // launched: each policy its own
    for (const auto& policy : e.policies)
      if (!b.policy_urls.count(policy))
        r.failAt(r.lineOf("backend"), key,
                 fmt::format("has no servers for '{}' and the backend has no url or urls; allowed: an entry for every "
                             "policy the pool serves, or url/urls for the others",
                             policy));
  }

  void checkWhole(YamlReader& top) const {
    if (hub_entries_ == 0) {
      top.fail("layout",
               "no dataflow entry; allowed: exactly one {role: dataflow, ranks: 1} (or, for a remote "
               "site's job, one {role: gateway, ranks: 1})");
    }
    if (gateway_ && !trainer_line_.empty()) {
      top.failAt(trainer_line_.begin()->second, "layout",
                 "a trainer entry in a gateway site's layout; allowed: gateway and rollout entries only (the "
                 "trainers run at the home site)");
    }
    for (const auto& p : policies_) {
      if (!gateway_ && !trainer_line_.count(p.name)) {
        top.failAt(p.line, "layout",
                   fmt::format("policy '{}' has no trainer entry; every policy needs one "
                               "{{role: trainer, policy: {}}}",
                               p.name, p.name));
      }
      if (!served_.count(p.name)) {
        top.failAt(p.line, "layout",
                   fmt::format("policy '{}' is served by no rollout entry; every policy needs "
                               "a {{role: rollout, policies: [{}]}}",
                               p.name, p.name));
      }
    }
  }

  const std::vector<PolicySection>& policies_;
  std::string source_, defined_;
  std::vector<LayoutEntry> out_;
  int hub_entries_ = 0;
  bool gateway_ = false;
  std::map<std::string, int> trainer_line_;  // policy -> its trainer entry's line
  std::map<std::string, int> served_;        // policy -> rollout entries serving it
};

}  // namespace

std::vector<LayoutEntry> parseLayout(YamlReader& top, const std::vector<PolicySection>& policies,
                                     const std::string& source) {
  return LayoutParser(policies, source).parse(top);
}

}  // namespace astraflow
