// The `layout` section: rank roles and counts, each rollout entry's backend (engine, http,
// simulated), and the checks that span entries (one hub, one trainer entry per policy, every
// policy trained and served, distinct pool names).
#include "core/layout_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <map>

#include "astraflow/core/text_pattern.hpp"
#include "core/simulation_config.hpp"

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

// "http://host:port" with an optional trailing slash: what HttpClient connects to.
bool isHttpUrl(const std::string& url) {
  static const TextPattern pattern(R"(http://[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}/?)", "the http backend url check");
  return pattern.fullMatch(url).has_value();
}

RolloutBackendSpec parseBackend(YamlReader& entry) {
  RolloutBackendSpec b;
  if (!entry.has("backend")) return b;
  YamlReader r = entry.child("backend");
  b.kind = r.requireEnum("kind", kBackendKindNames);
  if (b.isSimulated()) detail::parseSimulatedBackend(r, b.simulated);
  if (!b.http()) {
    r.finish();
    return b;
  }
  b.api = r.getEnum("api", HttpApi::Sglang, kHttpApiNames);
  if (r.has("url") == r.has("urls")) r.fail("url", "give exactly one of url (one server) and urls (one per rank)");
  if (r.has("url"))
    b.urls = {r.requireString("url")};
  else
    b.urls = r.requireStringList("urls");
  for (const auto& u : b.urls) {
    if (!isHttpUrl(u)) r.fail(r.has("url") ? "url" : "urls", fmt::format("given '{}'; allowed: http://host:port", u));
  }
  b.model = r.getString("model", "");
  b.max_in_flight = static_cast<int>(r.getInt("max_in_flight", b.max_in_flight, 1, 4096));
  b.timeout_seconds = r.getDouble("timeout_seconds", b.timeout_seconds, 0.1, 86400);
  b.retries = static_cast<int>(r.getInt("retries", b.retries, 0, 100));
  b.backoff_seconds = r.getDouble("backoff_seconds", b.backoff_seconds, 0, 3600);
  b.weights_dir = r.getString("weights_dir", "");
  b.update_path = r.getString("update_path", b.update_path);
  if (b.update_path.empty() || b.update_path[0] != '/')
    r.fail("update_path", fmt::format("given '{}'; allowed: a path starting with /", b.update_path));
  b.update_mode = r.getEnum("update_mode", b.update_mode, kHttpUpdateModeNames);
  b.keep_versions = static_cast<int>(r.getInt("keep_versions", b.keep_versions, 1, 1000));
  b.lost_after_seconds = r.getDouble("lost_after_seconds", b.lost_after_seconds, 1, 86400);
  r.finish();
  return b;
}

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
      e.role = r.requireEnum("role", kRoleNames);
      e.ranks = static_cast<int>(r.getInt("ranks", 1, 1, 1 << 20, "ranks"));
      switch (e.role) {
        case Role::Dataflow:
        case Role::Gateway: hub(r, e); break;
        case Role::Trainer: trainer(r, e); break;
        case Role::Rollout: rollout(r, e, i); break;
      }
      r.finish();
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

  void trainer(YamlReader& r, LayoutEntry& e) {
    e.policy = r.requireString("policy");
    checkPolicy(r, r.keyPath("policy"), r.lineOf("policy"), e.policy);
    if (trainer_line_.count(e.policy)) {
      r.fail("policy", fmt::format("policy '{}' already has a trainer entry (line {}); allowed: one trainer entry "
                                   "per policy (raise its ranks for data parallelism)",
                                   e.policy, trainer_line_[e.policy]));
    }
    trainer_line_[e.policy] = e.line;
  }

  void rollout(YamlReader& r, LayoutEntry& e, std::size_t i) {
    e.policies = r.requireStringList("policies");
    for (std::size_t j = 0; j < e.policies.size(); ++j) {
      checkPolicy(r, fmt::format("{}[{}]", r.keyPath("policies"), j), r.lineOf("policies"), e.policies[j]);
      served_[e.policies[j]]++;
    }
    e.backend = parseBackend(r);
    e.pool = r.getString("pool", fmt::format("pool{}", i));
    requireIdentifier(r, "pool", e.pool);
    for (const auto& other : out_) {
      if (other.role == Role::Rollout && other.pool == e.pool) {
        r.fail("pool", fmt::format("pool name '{}' is used twice (line {})", e.pool, other.line));
      }
    }
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
