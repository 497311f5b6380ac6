// summary.json from the gathered rank reports: run totals, per-policy weights and evaluation
// figures, per-site figures and every rank's own report.
#include "run/summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <type_traits>

#include "astraflow/core/error.hpp"

namespace astraflow::run_detail {

namespace {

// Writes a report's fields into one flat JSON object: scalars by name, an optional's fields as
// if they were the parent's, a list's by its element type's kJsonKey.
struct FlatJson {
  nlohmann::json& out;

  template <class T>
  void operator()(const char* field, const T& x) const {
    if constexpr (IsReportList<T>::value) {
      for (const auto& e : x) element(e);
    } else if constexpr (IsReportOptional<T>::value) {
      if (x) T::value_type::fields(*x, *this);
    } else {
      out[field] = x;
    }
  }

  template <class E>
  void element(const E& e) const {
    if constexpr (std::is_same_v<E, PluginCount>) {
      out[fmt::format(fmt::runtime(E::kJsonKey), fmt::arg("name", e.name), fmt::arg("counter", e.counter))] = e.value;
    } else {
      E::fields(e, [&](const char* field, const auto& x) {
        if (std::string_view(field) == "name") return;
        out[fmt::format(fmt::runtime(E::kJsonKey), fmt::arg("name", e.name), fmt::arg("field", field))] = x;
      });
    }
  }
};

// A list element's figures as an object of integers (the summary's per-policy/per-site form).
template <class E>
nlohmann::json integerFields(const E& e) {
  nlohmann::json out = nlohmann::json::object();
  E::fields(e, [&](const char* field, const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_arithmetic_v<T>) {
      if (std::string_view(field) != "name") out[field] = static_cast<std::int64_t>(x);
    }
  });
  return out;
}

// A figure that is negative when there is none (no evaluation ran): null in the summary.
nlohmann::json orNull(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

template <class T>
std::vector<const T*> ofRole(const std::vector<RankReport>& ranks) {
  std::vector<const T*> out;
  for (const auto& r : ranks) {
    if (const auto* f = std::get_if<T>(&r.figures)) out.push_back(f);
  }
  return out;
}

// Tokens generated and training trajectories pushed by every rollout rank.
std::pair<std::uint64_t, std::uint64_t> rolloutTotals(const std::vector<RankReport>& ranks) {
  std::uint64_t tokens = 0, trajectories = 0;
  for (const auto* r : ofRole<RolloutReport>(ranks)) {
    tokens += r->generated_tokens;
    trajectories += r->pushed;
  }
  return {tokens, trajectories};
}

// Why training episodes got their rewards, summed over the rollout ranks: {"correct": n, ...}.
nlohmann::json rewardReasons(const std::vector<RankReport>& ranks) {
  nlohmann::json sum = nlohmann::json::object();
  for (const auto* r : ofRole<RolloutReport>(ranks)) {
    RolloutReport::fields(*r, [&](std::string_view key, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::uint64_t>) {
        if (!key.starts_with("reward_")) return;
        const std::string reason(key.substr(7));
        sum[reason] = sum.value(reason, std::uint64_t{0}) + value;
      }
    });
  }
  return sum;
}

// Weight transfer per policy (docs/weights.md): what the store encoded, and what the rollout
// ranks pulled against what full versions would have cost for the same pulls.
nlohmann::json weightsSummary(const Config& cfg, const std::vector<RankReport>& ranks, const DataflowReport* df) {
  nlohmann::json out = {{"mode", enumName(kWeightsModeNames, cfg.weights.mode)},
                        {"compression", enumName(kWeightsCompressionNames, cfg.weights.compression)}};
  for (const auto& p : cfg.policies) {
    std::uint64_t pulls = 0, full = 0, deltas = 0, rejected = 0, bytes = 0, version_bytes = 0, relayed = 0,
                  relayed_deltas = 0, relayed_bytes = 0, kept_deltas = 0;
    for (const auto* r : ofRole<RolloutReport>(ranks)) {
      for (const auto& f : r->policies) {
        if (f.name != p.name) continue;
        pulls += f.weight_pulls;
        full += f.weight_full_pulls;
        deltas += f.weight_deltas_applied;
        rejected += f.weight_deltas_rejected;
        bytes += f.weight_bytes_pulled;
        relayed += f.node_versions_relayed;
        relayed_deltas += f.node_deltas_relayed;
        kept_deltas += f.node_deltas_kept;
        relayed_bytes += f.node_relay_bytes;
        version_bytes = std::max(version_bytes, f.weight_version_bytes);
      }
    }
    PolicyBooks books;
    if (df) {
      for (const auto& b : df->policies) {
        if (b.name == p.name) books = b;
      }
    }
    const auto logged = books.weights_deltas_logged;
    out["policies"][p.name] = {
        {"version_bytes", version_bytes},
        {"deltas_logged", logged},
        {"deltas_skipped", books.weights_deltas_skipped},
        {"mean_density", books.weights_compared_elements > 0 ? static_cast<double>(books.weights_changed_elements) /
                                                                   static_cast<double>(books.weights_compared_elements)
                                                             : 0.0},
        {"mean_delta_bytes",
         logged > 0 ? static_cast<double>(books.weights_delta_bytes_logged) / static_cast<double>(logged) : 0.0},
        {"rollout_pulls", pulls},
        {"rollout_full_pulls", full},
        {"rollout_deltas_applied", deltas},
        {"rollout_deltas_rejected", rejected},
        {"rollout_bytes_pulled", bytes},
        {"rollout_relayed_pulls", relayed},
        {"rollout_relayed_deltas", relayed_deltas},
        {"rollout_kept_deltas", kept_deltas},
        {"rollout_relayed_bytes", relayed_bytes},
        {"rollout_bytes_if_full", pulls * version_bytes}};
  }
  return out;
}

nlohmann::json rankList(const std::vector<RankReport>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : ranks) out.push_back(rankReportJson(r));
  return out;
}

}  // namespace

nlohmann::json rankReportJson(const RankReport& report) {
  nlohmann::json out = nlohmann::json::object();
  std::visit([&](const auto& f) { std::decay_t<decltype(f)>::fields(f, FlatJson{out}); }, report.figures);
  // Figures derived from the listed ones, under the names they always had.
  if (const auto* r = std::get_if<RolloutReport>(&report.figures)) {
    std::uint64_t pulls = 0, full = 0, deltas = 0, rejected = 0, bytes = 0, torn = 0;
    for (const auto& p : r->policies) {
      pulls += p.weight_pulls;
      full += p.weight_full_pulls;
      deltas += p.weight_deltas_applied;
      rejected += p.weight_deltas_rejected;
      bytes += p.weight_bytes_pulled;
      torn += p.torn_retries;
    }
    out["weight_pulls"] = pulls;
    out["weight_full_pulls"] = full;
    out["weight_deltas_applied"] = deltas;
    out["weight_deltas_rejected"] = rejected;
    out["weight_bytes_pulled"] = bytes;
    out["torn_retries"] = torn;
    out["final_version"] = r->policies.empty() ? -1 : r->policies.front().final_version;
  } else if (const auto* t = std::get_if<TrainerReport>(&report.figures)) {
    out["wait_fraction"] = t->waitFraction();
  }
  out["rank"] = report.rank;
  out["role"] = report.roleName();
  out["label"] = report.label;
  // The plan beside what the rank reached (docs/memory.md).
  out["memory_plan_bytes"] = report.memory_plan_bytes;
  out["memory_peak_rss_bytes"] = report.peak_rss_bytes;
  out["memory_plan_private_bytes"] = report.memory_plan_private_bytes;  // less node-shared items
  out["memory_peak_private_bytes"] = report.peak_private_bytes;         // sampled RssAnon
  out["cpu_seconds"] = report.cpu_seconds;  // user + system of the process (docs/simulation.md)
  out["startup_cpu_seconds"] = report.startup_cpu_seconds;
  return out;
}

nlohmann::json summarizeSite(const Config& cfg, const std::vector<RankReport>& ranks) {
  nlohmann::json s;
  s["run"] = cfg.run.name;
  s["site"] = cfg.cross_site.site;
  s["home"] = cfg.cross_site.connect;
  for (const auto& r : ranks) {
    if (!std::holds_alternative<GatewayReport>(r.figures)) continue;
    const nlohmann::json gateway = rankReportJson(r);  // items() does not keep a temporary alive
    for (const auto& [key, value] : gateway.items()) {
      if (key != "rank" && key != "role" && key != "label") s["gateway"][key] = value;
    }
  }
  const auto [tokens, trajectories] = rolloutTotals(ranks);
  s["rollout_trajectories"] = trajectories;
  s["rollout_tokens"] = tokens;
  s["weights"] = weightsSummary(cfg, ranks, nullptr);
  s["ranks"] = rankList(ranks);
  return s;
}

namespace {

// Per policy: the dataflow rank's books and its trainer group's figures (the first rank).
nlohmann::json policiesSummary(const Config& cfg, const std::vector<RankReport>& ranks, const DataflowReport& df) {
  nlohmann::json policies = nlohmann::json::object();
  for (const auto& p : cfg.policies) {
    nlohmann::json entry = nlohmann::json::object();
    for (const auto& b : df.policies) {
      if (b.name == p.name) entry = integerFields(b);
    }
    for (const auto& r : ranks) {
      const auto* t = std::get_if<TrainerReport>(&r.figures);
      if (!t || r.label != "trainer:" + p.name) continue;
      entry["trained"] = t->trajectories_trained;
      entry["foreign_trajectories"] = t->foreign_trajectories;
      entry["mean_reward"] = t->mean_reward;
      entry["trainer_wait_fraction"] = t->waitFraction();
      break;
    }
    policies[p.name] = entry;
  }
  return policies;
}

// The home job's sites: each site's figures and the hub's counts.
nlohmann::json crossSiteSummary(const DataflowReport& df) {
  const SiteHubFigures hub = df.cross_site.value_or(SiteHubFigures{});
  nlohmann::json sites = nlohmann::json::object();
  for (const auto& site : hub.sites) sites[site.name] = integerFields(site);
  return {{"sites", sites},
          {"joined", hub.sites_joined},
          {"lost", hub.sites_lost},
          {"refused", hub.sites_refused},
          {"malformed", hub.sites_malformed},
          {"auth_failed", hub.sites_auth_failed},
          {"tasks_reissued", hub.site_tasks_reissued},
          {"stalled", hub.sites_stalled}};
}

// A multi-policy workflow: the team's held-out accuracy is the evaluation's; each role's own
// eval reward beside it.
void addWorkflowRoles(const Config& cfg, const DataflowReport& df, nlohmann::json& s) {
  s["team_accuracy_start"] = s["eval_accuracy_start"];
  s["team_accuracy_end"] = s["eval_accuracy_end"];
  nlohmann::json roles = nlohmann::json::object();
  for (const auto& role : cfg.workflow.roles) {
    RoleEvalReward reward;
    for (const auto& r : df.roles) {
      if (r.name == role.name) reward = r;
    }
    roles[role.name] = {{"policy", role.policy},
                        {"reward", enumName(kRoleRewardNames, role.reward)},
                        {"eval_reward_start", orNull(reward.eval_reward_start)},
                        {"eval_reward_end", orNull(reward.eval_reward_end)}};
  }
  s["roles"] = roles;
}

}  // namespace

nlohmann::json summarize(const Config& cfg, const std::vector<RankReport>& ranks, std::int64_t resumed_from) {
  const auto dfs = ofRole<DataflowReport>(ranks);
  if (dfs.size() != 1) throw Error(fmt::format("summary: {} dataflow rank reports, expected 1", dfs.size()));
  const DataflowReport& df = *dfs.front();
  nlohmann::json s;
  s["run"] = cfg.run.name;
  s["mode"] = enumName(kRunModeNames, cfg.run.mode);
  s["resumed_from"] = resumed_from >= 0 ? nlohmann::json(resumed_from) : nlohmann::json(nullptr);
  s["versions"] = df.versions;
  s["produced"] = df.produced;
  s["accepted"] = df.accepted;
  s["filtered"] = df.filtered;
  s["stale_dropped"] = df.stale_dropped;
  s["consumed"] = df.consumed;
  s["buffered"] = df.buffered;
  s["eval_accuracy_start"] = orNull(df.eval_accuracy_start);
  s["eval_samples"] = cfg.eval.samples;
  s["eval_pass_at_k_end"] = orNull(df.eval_pass_at_k_end);
  s["eval_accuracy_end"] = orNull(df.eval_accuracy_end);
  s["eval_version_end"] = df.eval_version_end >= 0 ? nlohmann::json(df.eval_version_end) : nlohmann::json(nullptr);
  nlohmann::json sets = nlohmann::json::object();  // the last round, set by set (their mean: eval_accuracy_end)
  for (const auto& set : df.eval_sets)
    sets[set.name] = {
        {"accuracy", set.accuracy}, {"pass_at_k", set.pass_at_k}, {"problems", set.problems}, {"samples", set.samples}};
  s["eval_sets"] = sets;
  s["eval_best_version"] = df.eval_best_version >= 0 ? nlohmann::json(df.eval_best_version) : nlohmann::json(nullptr);
  s["eval_best_mean"] = orNull(df.eval_best_mean);
  double wait = 0;
  const auto trainers = ofRole<TrainerReport>(ranks);
  for (const auto* t : trainers) wait += t->waitFraction();
  const auto [tokens, trajectories] = rolloutTotals(ranks);
  const double segment = std::max(1e-9, df.segment_wall_seconds);
  s["trainer_wait_fraction"] = trainers.empty() ? 0.0 : wait / static_cast<double>(trainers.size());
  s["rollout_tokens_per_s"] = static_cast<double>(tokens) / segment;
  s["rollout_trajectories_per_s"] = static_cast<double>(trajectories) / segment;
  s["wall_seconds"] = df.wall_seconds;
  s["filtered_nonfinite"] = df.filtered_nonfinite;
  s["filtered_error"] = df.filtered_error;
  s["malformed"] = df.malformed;
  s["unroutable"] = df.unroutable;
  s["tasks_unsent"] = df.tasks_unsent;
  s["eval_rounds"] = df.eval_rounds;
  s["trajectories_written"] = df.trajectories_written;
  s["segment_wall_seconds"] = df.segment_wall_seconds;
  s["replayed"] = df.replayed;
  s["rollouts_generated"] = df.produced;  // every training rollout the run paid for
  s["reward_reasons"] = rewardReasons(ranks);
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& c : df.plugins) plugins[c.name][c.counter] = c.value;
  s["plugins"] = plugins;
  s["policies"] = policiesSummary(cfg, ranks, df);
  s["weights"] = weightsSummary(cfg, ranks, &df);
  if (!cfg.cross_site.listen.empty()) s["cross_site"] = crossSiteSummary(df);
  s["workflow"] = cfg.workflow.kindName();
  if (cfg.workflow.multiAgent()) addWorkflowRoles(cfg, df, s);
  s["ranks"] = rankList(ranks);
  return s;
}

}  // namespace astraflow::run_detail
