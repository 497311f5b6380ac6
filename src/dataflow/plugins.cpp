// Registries of the data-algorithm plug-ins and the built-in ones that need no more than a few
// lines: keep_all, zero_advantage, the fresh / freshest_first / staleness_weighted samplers and
// the by_policy and by_role routers. The replay sampler and the GRESO curator have files of their own.
#include "astraflow/dataflow/plugins.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <mutex>

#include "astraflow/core/config_checks.hpp"
#include "dataflow/builtin_plugins.hpp"

namespace astraflow {

namespace {

template <class T>
struct Registry {
  std::map<std::string, PluginFactory<T>> factories;
};

template <class T>
Registry<T>& registry() {
  static Registry<T> r;
  return r;
}

void ensureBuiltins();

template <class T>
std::unique_ptr<T> make(const PluginSpec& spec, const char* what) {
  ensureBuiltins();
  auto& r = registry<T>();
  auto it = r.factories.find(spec.kind);
  if (it == r.factories.end()) {
    std::vector<std::string> kinds;
    for (const auto& [k, f] : r.factories) kinds.push_back(k);
    throw ConfigError(
        fmt::format("{}: unknown {} '{}'; allowed: {}", spec.key, what, spec.kind, fmt::join(kinds, ", ")));
  }
  return it->second(spec);
}

template <class T>
std::vector<std::string> kinds() {
  ensureBuiltins();
  std::vector<std::string> out;
  for (const auto& [k, f] : registry<T>().factories) out.push_back(k);
  return out;
}

// ---- filters ----

class KeepAll : public Filter {
 public:
  std::string name() const override { return "keep_all"; }
  bool keep(const ReadyGroup&) override { return true; }
};

// DAPO dynamic sampling: a group whose rewards all equal has zero advantage everywhere and
// teaches nothing; drop it and let admission bring another prompt.
class ZeroAdvantage : public Filter {
 public:
  std::string name() const override { return "zero_advantage"; }
  bool keep(const ReadyGroup& g) override {
    for (const auto& t : g.members) {
      if (t.rewards.at(0) != g.members.front().rewards.at(0)) return true;
    }
    return false;
  }
};

// ---- samplers ----

// Oldest first: the default, and what every batch looked like before samplers existed.
class FreshSampler : public Sampler {
 public:
  std::string name() const override { return "fresh"; }
  bool take(std::deque<ReadyGroup>& ready, std::size_t count, std::int64_t, std::mt19937_64&,
            std::vector<ReadyGroup>& out) override {
    if (ready.size() < count) return false;
    for (std::size_t i = 0; i < count; ++i) {
      out.push_back(std::move(ready.front()));
      ready.pop_front();
    }
    return true;
  }
};

// Takes the `count` groups made with the newest weights (ties: the later arrival first).
class FreshestFirstSampler : public Sampler {
 public:
  std::string name() const override { return "freshest_first"; }
  bool take(std::deque<ReadyGroup>& ready, std::size_t count, std::int64_t, std::mt19937_64&,
            std::vector<ReadyGroup>& out) override {
    if (ready.size() < count) return false;
    std::vector<std::size_t> order(ready.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;  // later arrivals first
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return ready[a].oldest_version > ready[b].oldest_version; });
    takeIndices(ready, {order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count)}, out);
    return true;
  }
};

// Draws groups without replacement with weight 1 / (1 + staleness): fresher data is likelier,
// older data still gets through.
class StalenessWeightedSampler : public Sampler {
 public:
  std::string name() const override { return "staleness_weighted"; }
  bool take(std::deque<ReadyGroup>& ready, std::size_t count, std::int64_t version, std::mt19937_64& rng,
            std::vector<ReadyGroup>& out) override {
    if (ready.size() < count) return false;
    std::vector<double> weight(ready.size());
    for (std::size_t i = 0; i < ready.size(); ++i) {
      weight[i] = 1.0 / (1.0 + static_cast<double>(std::max<std::int64_t>(0, version - ready[i].oldest_version)));
    }
    std::vector<std::size_t> chosen;
    for (std::size_t k = 0; k < count; ++k) {
      std::discrete_distribution<std::size_t> pick(weight.begin(), weight.end());
      const std::size_t i = pick(rng);
      chosen.push_back(i);
      weight[i] = 0;
    }
    takeIndices(ready, chosen, out);
    return true;
  }
};

// ---- routers ----

class ByPolicyRouter : public Router {
 public:
  std::string name() const override { return "by_policy"; }
  int route(const Trajectory& t, const std::vector<std::string>& policies) override {
    auto it = std::find(policies.begin(), policies.end(), t.policy);
    return it == policies.end() ? -1 : static_cast<int>(it - policies.begin());
  }
};

// Role → policy from its parameters ({kind: by_role, solver: solver, verifier: verifier}; a
// multi-agent workflow fills them from workflow.roles). A trajectory without a role (a
// single-agent episode) goes to its own policy.
class ByRoleRouter : public Router {
 public:
  explicit ByRoleRouter(std::map<std::string, std::string> role_policy) : role_policy_(std::move(role_policy)) {}
  std::string name() const override { return "by_role"; }
  int route(const Trajectory& t, const std::vector<std::string>& policies) override {
    const std::string* target = &t.policy;
    if (!t.role.empty()) {
      auto it = role_policy_.find(t.role);
      if (it == role_policy_.end()) return -1;
      target = &it->second;
    }
    auto it = std::find(policies.begin(), policies.end(), *target);
    return it == policies.end() ? -1 : static_cast<int>(it - policies.begin());
  }

 private:
  std::map<std::string, std::string> role_policy_;
};

template <class T>
PluginFactory<Filter> filterWithoutParameters() {
  return [](const PluginSpec& spec) -> std::unique_ptr<Filter> {
    spec.allowOnly({});
    return std::make_unique<T>();
  };
}

template <class T>
PluginFactory<Sampler> samplerWithoutParameters() {
  return [](const PluginSpec& spec) -> std::unique_ptr<Sampler> {
    spec.allowOnly({});
    return std::make_unique<T>();
  };
}

void ensureBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    registry<Filter>().factories.emplace("keep_all", filterWithoutParameters<KeepAll>());
    registry<Filter>().factories.emplace("zero_advantage", filterWithoutParameters<ZeroAdvantage>());
    registry<Sampler>().factories.emplace("fresh", samplerWithoutParameters<FreshSampler>());
    registry<Sampler>().factories.emplace("freshest_first", samplerWithoutParameters<FreshestFirstSampler>());
    registry<Sampler>().factories.emplace("staleness_weighted", samplerWithoutParameters<StalenessWeightedSampler>());
    registry<Sampler>().factories.emplace("replay", makeReplaySampler);
    registry<Router>().factories.emplace("by_policy", [](const PluginSpec& spec) -> std::unique_ptr<Router> {
      spec.allowOnly({});
      return std::make_unique<ByPolicyRouter>();
    });
    registry<Router>().factories.emplace("by_role", [](const PluginSpec& spec) -> std::unique_ptr<Router> {
      return std::make_unique<ByRoleRouter>(spec.params);
    });
    registry<Curator>().factories.emplace("greso", makeGresoCurator);
    registry<Curator>().factories.emplace("curriculum", makeCurriculumCurator);
  });
}

}  // namespace

void takeIndices(std::deque<ReadyGroup>& ready, std::vector<std::size_t> indices, std::vector<ReadyGroup>& out) {
  for (auto i : indices) out.push_back(std::move(ready[i]));
  std::sort(indices.begin(), indices.end());
  std::deque<ReadyGroup> rest;
  std::size_t next = 0;
  for (std::size_t i = 0; i < ready.size(); ++i) {
    if (next < indices.size() && indices[next] == i) {
      ++next;
      continue;
    }
    rest.push_back(std::move(ready[i]));
  }
  ready = std::move(rest);
}

void registerCurator(const std::string& kind, PluginFactory<Curator> factory) {
  ensureBuiltins();
  registry<Curator>().factories[kind] = std::move(factory);
}
void registerFilter(const std::string& kind, PluginFactory<Filter> factory) {
  ensureBuiltins();
  registry<Filter>().factories[kind] = std::move(factory);
}
void registerSampler(const std::string& kind, PluginFactory<Sampler> factory) {
  ensureBuiltins();
  registry<Sampler>().factories[kind] = std::move(factory);
}
void registerRouter(const std::string& kind, PluginFactory<Router> factory) {
  ensureBuiltins();
  registry<Router>().factories[kind] = std::move(factory);
}

std::unique_ptr<Curator> makeCurator(const PluginSpec& spec) { return make<Curator>(spec, "curator"); }
std::unique_ptr<Filter> makeFilter(const PluginSpec& spec) { return make<Filter>(spec, "filter"); }
std::unique_ptr<Sampler> makeSampler(const PluginSpec& spec) { return make<Sampler>(spec, "sampler"); }
std::unique_ptr<Router> makeRouter(const PluginSpec& spec) { return make<Router>(spec, "router"); }

std::vector<std::string> curatorKinds() { return kinds<Curator>(); }
std::vector<std::string> filterKinds() { return kinds<Filter>(); }
std::vector<std::string> samplerKinds() { return kinds<Sampler>(); }
std::vector<std::string> routerKinds() { return kinds<Router>(); }

std::int64_t servedStalenessBound(const Config& cfg) {
  const std::int64_t eta = cfg.run.mode == RunMode::Sync ? 0 : cfg.dataflow.max_staleness;
  return std::max<std::int64_t>(eta, makeSampler(cfg.dataflow.sampler)->maxStaleness());
}

void registerDataflowConfigChecks() {
  configChecks().dataflow_plugins = [](const DataflowSection& df) {
    for (const auto& spec : df.curators) makeCurator(spec);
    for (const auto& spec : df.filters) makeFilter(spec);
    makeSampler(df.sampler);
    makeRouter(df.router);
  };
}

}  // namespace astraflow
