#include "astraflow/run/runtime.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/dataflow/dataflow_checkpoint.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "astraflow/model/model_setup.hpp"
#include "astraflow/run/role_entry.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

namespace fs = std::filesystem;

namespace {

int ranksOnNode(const Comm& world) {
  MPI_Comm node = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_split_type(world.raw(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
  Comm owned = Comm::adopt(node);
  return owned.size();
}

// Collective over world: every rank's report, as JSON text, gathered on `root`.
std::vector<nlohmann::json> gatherReports(const Comm& world, int root, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  int size = static_cast<int>(text.size());
  std::vector<int> sizes(world.rank() == root ? world.size() : 0);
  ASTRA_MPI_CHECK(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, world.raw()));
  std::vector<int> offsets(sizes.size(), 0);
  int total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    offsets[i] = total;
    total += sizes[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  ASTRA_MPI_CHECK(
      MPI_Gatherv(text.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, root, world.raw()));
  std::vector<nlohmann::json> out;
  for (std::size_t i = 0; i < sizes.size(); ++i) out.push_back(nlohmann::json::parse(all.substr(offsets[i], sizes[i])));
  return out;
}

// Weight transfer per policy (docs/weights.md): what the store encoded, and what the rollout
// ranks pulled against what full versions would have cost for the same pulls.
nlohmann::json weightsSummary(const Config& cfg, const std::vector<nlohmann::json>& ranks, const nlohmann::json& df) {
  nlohmann::json out = {{"mode", cfg.weights.mode}, {"compression", cfg.weights.compression}};
  for (const auto& p : cfg.policies) {
    const std::string k = "policy." + p.name + ".weights_";
    auto dfNumber = [&](const char* key) { return df.value(k + key, 0.0); };
    double pulls = 0, full = 0, deltas = 0, rejected = 0, bytes = 0, version_bytes = 0;
    for (const auto& r : ranks) {
      if (r["role"] != "rollout" || !r.contains("weight_pulls." + p.name)) continue;
      pulls += r["weight_pulls." + p.name].get<double>();
      full += r["weight_full_pulls." + p.name].get<double>();
      deltas += r["weight_deltas_applied." + p.name].get<double>();
      rejected += r["weight_deltas_rejected." + p.name].get<double>();
      bytes += r["weight_bytes_pulled." + p.name].get<double>();
      version_bytes = std::max(version_bytes, r["weight_version_bytes." + p.name].get<double>());
    }
    const double compared = dfNumber("compared_elements");
    const double logged = dfNumber("deltas_logged");
    out["policies"][p.name] = {{"version_bytes", static_cast<std::int64_t>(version_bytes)},
                               {"deltas_logged", static_cast<std::int64_t>(logged)},
                               {"deltas_skipped", static_cast<std::int64_t>(dfNumber("deltas_skipped"))},
                               {"mean_density", compared > 0 ? dfNumber("changed_elements") / compared : 0.0},
                               {"mean_delta_bytes", logged > 0 ? dfNumber("delta_bytes_logged") / logged : 0.0},
                               {"rollout_pulls", static_cast<std::int64_t>(pulls)},
                               {"rollout_full_pulls", static_cast<std::int64_t>(full)},
                               {"rollout_deltas_applied", static_cast<std::int64_t>(deltas)},
                               {"rollout_deltas_rejected", static_cast<std::int64_t>(rejected)},
                               {"rollout_bytes_pulled", static_cast<std::int64_t>(bytes)},
                               {"rollout_bytes_if_full", static_cast<std::int64_t>(pulls * version_bytes)}};
  }
  return out;
}

// A gateway site's summary: its link home and what its pool did.
nlohmann::json summarizeSite(const Config& cfg, const std::vector<nlohmann::json>& ranks) {
  nlohmann::json s;
  s["run"] = cfg.run.name;
  s["site"] = cfg.cross_site.site;
  s["home"] = cfg.cross_site.connect;
  double tokens = 0, trajectories = 0;
  for (const auto& r : ranks) {
    if (r["role"] == "gateway") {
      for (const auto& [key, value] : r.items()) {
        if (key != "rank" && key != "role" && key != "label") s["gateway"][key] = value;
      }
    } else if (r["role"] == "rollout") {
      tokens += r["generated_tokens"].get<double>();
      trajectories += r["pushed"].get<double>();
    }
  }
  s["rollout_trajectories"] = static_cast<std::int64_t>(trajectories);
  s["rollout_tokens"] = static_cast<std::int64_t>(tokens);
  s["weights"] = weightsSummary(cfg, ranks, nlohmann::json::object());
  s["ranks"] = ranks;
  return s;
}

nlohmann::json summarize(const Config& cfg, const std::vector<nlohmann::json>& ranks, std::int64_t resumed_from) {
  nlohmann::json s;
  const nlohmann::json* df = nullptr;
  for (const auto& r : ranks) {
    if (r["role"] == "dataflow") df = &r;
  }
  s["run"] = cfg.run.name;
  s["mode"] = cfg.run.mode;
  s["resumed_from"] = resumed_from >= 0 ? nlohmann::json(resumed_from) : nlohmann::json(nullptr);
  for (const char* key : {"versions", "produced", "accepted", "filtered", "stale_dropped", "consumed", "buffered"}) {
    s[key] = static_cast<std::int64_t>((*df)[key].get<double>());
  }
  auto accuracy = [&](const char* key) {
    const double v = (*df)[key].get<double>();
    return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
  };
  s["eval_accuracy_start"] = accuracy("eval_accuracy_start");
  s["eval_accuracy_end"] = accuracy("eval_accuracy_end");
  double wait = 0, tokens = 0, trajectories = 0;
  int trainers = 0;
  for (const auto& r : ranks) {
    if (r["role"] == "trainer") {
      wait += r["wait_fraction"].get<double>();
      ++trainers;
    } else if (r["role"] == "rollout") {
      tokens += r["generated_tokens"].get<double>();
      trajectories += r["pushed"].get<double>();
    }
  }
  const double segment = std::max(1e-9, (*df)["segment_wall_seconds"].get<double>());
  s["trainer_wait_fraction"] = trainers ? wait / trainers : 0.0;
  s["rollout_tokens_per_s"] = tokens / segment;
  s["rollout_trajectories_per_s"] = trajectories / segment;
  s["wall_seconds"] = (*df)["wall_seconds"].get<double>();
  for (const char* key : {"filtered_nonfinite", "filtered_error", "malformed", "unroutable", "tasks_unsent",
                          "eval_rounds", "trajectories_written"}) {
    s[key] = static_cast<std::int64_t>((*df)[key].get<double>());
  }
  s["segment_wall_seconds"] = (*df)["segment_wall_seconds"];
  s["replayed"] = static_cast<std::int64_t>((*df)["replayed"].get<double>());
  s["rollouts_generated"] = s["produced"];  // every training rollout the run paid for
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& [key, value] : df->items()) {
    if (key.rfind("plugin.", 0) != 0) continue;
    // "plugin.filter.0.zero_advantage@solver.dropped" → plugins["filter.0.zero_advantage@solver"]["dropped"]
    const auto last_dot = key.rfind('.');
    plugins[key.substr(7, last_dot - 7)][key.substr(last_dot + 1)] = static_cast<std::int64_t>(value.get<double>());
  }
  s["plugins"] = plugins;
  // Per policy: the dataflow rank's counters ("policy.<name>.<counter>") and its trainer group's
  // figures (the first rank of the group).
  nlohmann::json policies = nlohmann::json::object();
  for (const auto& p : cfg.policies) {
    nlohmann::json entry = nlohmann::json::object();
    const std::string prefix = "policy." + p.name + ".";
    for (const auto& [key, value] : df->items()) {
      if (key.rfind(prefix, 0) == 0) entry[key.substr(prefix.size())] = static_cast<std::int64_t>(value.get<double>());
    }
    for (const auto& r : ranks) {
      if (r["label"] != "trainer:" + p.name) continue;
      entry["trained"] = static_cast<std::int64_t>(r["trajectories_trained"].get<double>());
      entry["foreign_trajectories"] = static_cast<std::int64_t>(r["foreign_trajectories"].get<double>());
      entry["mean_reward"] = r["mean_reward"];
      entry["trainer_wait_fraction"] = r["wait_fraction"];
      break;
    }
    policies[p.name] = entry;
  }
  s["policies"] = policies;
  s["weights"] = weightsSummary(cfg, ranks, *df);
  if (!cfg.cross_site.listen.empty()) {
    // "site.<name>.<counter>" → sites.<name>.<counter>
    nlohmann::json sites = nlohmann::json::object();
    for (const auto& [key, value] : df->items()) {
      if (key.rfind("site.", 0) != 0) continue;
      const auto last_dot = key.rfind('.');
      sites[key.substr(5, last_dot - 5)][key.substr(last_dot + 1)] = static_cast<std::int64_t>(value.get<double>());
    }
    s["cross_site"] = {{"sites", sites},
                       {"joined", static_cast<std::int64_t>(df->value("sites_joined", 0.0))},
                       {"lost", static_cast<std::int64_t>(df->value("sites_lost", 0.0))},
                       {"refused", static_cast<std::int64_t>(df->value("sites_refused", 0.0))},
                       {"malformed", static_cast<std::int64_t>(df->value("sites_malformed", 0.0))},
                       {"tasks_reissued", static_cast<std::int64_t>(df->value("site_tasks_reissued", 0.0))},
                       {"stalled", static_cast<std::int64_t>(df->value("sites_stalled", 0.0))}};
  }
  s["workflow"] = cfg.workflow.kind;
  if (cfg.workflow.multiAgent()) {
    // The team's held-out accuracy is the evaluation's; each role's own eval reward beside it.
    s["team_accuracy_start"] = s["eval_accuracy_start"];
    s["team_accuracy_end"] = s["eval_accuracy_end"];
    nlohmann::json roles = nlohmann::json::object();
    for (const auto& role : cfg.workflow.roles) {
      const std::string k = "role." + role.name + ".eval_reward_";
      roles[role.name] = {{"policy", role.policy},
                          {"reward", role.reward},
                          {"eval_reward_start", accuracy((k + "start").c_str())},
                          {"eval_reward_end", accuracy((k + "end").c_str())}};
    }
    s["roles"] = roles;
  }
  s["ranks"] = ranks;
  return s;
}

}  // namespace

RunOutcome runRuntime(const Config& cfg, const RoleMap& map, const RoleComms& comms, const RuntimeOptions& options) {
  const Comm& world = comms.world;
  const int me = world.rank();
  const int df_rank = map.dataflowRank();
  const bool is_df = me == df_rank;
  const bool resume = !options.resume_dir.empty();
  const fs::path run_dir = resume ? fs::path(options.resume_dir) : fs::path(cfg.run.output_dir);

  std::vector<std::string> policies;
  for (const auto& g : map.trainerGroups()) policies.push_back(g.policy);
  std::int64_t resume_version = -1;
  if (resume && cfg.workflow.multiAgent()) {
    // Each policy's trainer checkpoints at its own pace while the dataflow checkpoint follows
    // the first role's versions, so a resumed team's books would not balance (measured: a
    // verifier trained 48 trajectories, its books said 40). Refused until checkpoints are taken
    // at a version every policy has reached.
    throw ConfigError(
        fmt::format("--resume {}: resuming a multi-policy run (workflow {}) is not supported yet "
                    "(docs/multi-policy.md); start a new run",
                    run_dir.string(), cfg.workflow.kind));
  }
  if (resume && cfg.isGatewaySite()) {
    throw ConfigError(
        fmt::format("--resume {}: a gateway site keeps no checkpoints (its home job does); start it "
                    "anew, it reconnects and pulls the current weights",
                    run_dir.string()));
  }
  if (resume) {
    if (is_df) resume_version = newestCheckpoint(run_dir, policies);
    ASTRA_MPI_CHECK(MPI_Bcast(&resume_version, 1, MPI_INT64_T, df_rank, world.raw()));
    if (resume_version < 0) {
      throw ConfigError(fmt::format("--resume {}: no complete checkpoint in {}", run_dir.string(),
                                    (run_dir / "checkpoints").string()));
    }
  }
  if (is_df) {
    fs::create_directories(run_dir / "trace");
    fs::create_directories(run_dir / "checkpoints");
    if (!resume) std::ofstream(run_dir / "config.yaml") << cfg.text;
  }
  world.barrier();

  RunWiring w{cfg, map, comms};
  w.run_dir = run_dir;
  w.resume = resume;
  w.resume_version = resume_version;
  w.ranks_on_node = ranksOnNode(world);
  w.weight_version_bytes = [&cfg](const std::string& policy) {
    return weightVersionBytes(cfg, tokenSpecOf(*makeTaskTokenizer()), policy);
  };
  wireWindows(w);

  if (resume) {
    double offset = 0;
    if (is_df) offset = readDataflowCheckpoint(run_dir, resume_version).wall_seconds;
    ASTRA_MPI_CHECK(MPI_Bcast(&offset, 1, MPI_DOUBLE, df_rank, world.raw()));
    w.clock_offset = offset;
  }
  world.barrier();
  w.t0 = MPI_Wtime() - w.clock_offset;
  const fs::path rank_trace = run_dir / "trace" / fmt::format("rank_{}.h5", me);
  RankReport report;
  {
    io::TraceWriter trace(rank_trace.string());
    w.trace = &trace;
    w.event("startup", 0.0, resume_version);
    report = runRole(w);
    w.trace = nullptr;
  }

  nlohmann::json mine(report);
  mine["rank"] = me;
  mine["role"] = roleName(w.role().role);
  mine["label"] = w.role().label();
  auto reports = gatherReports(world, df_rank, mine);
  RunOutcome outcome;
  int lost = w.peer_lost ? 1 : 0;
  ASTRA_MPI_CHECK(MPI_Bcast(&lost, 1, MPI_INT, df_rank, world.raw()));
  outcome.peer_lost = lost != 0;
  if (is_df) {
    for (const auto& text : w.spawned_reports) reports.push_back(nlohmann::json::parse(text));
    const auto summary = cfg.isGatewaySite() ? summarizeSite(cfg, reports) : summarize(cfg, reports, resume_version);
    outcome.reporting_rank = true;
    outcome.summary_json = summary.dump();
    std::ofstream(run_dir / "summary.json") << summary.dump(2) << "\n";
  }
  world.barrier();  // every per-rank trace file is closed
  if (is_df) {
    std::vector<std::string> inputs;
    const fs::path merged = run_dir / "trace.h5";
    if (resume && fs::exists(merged)) {
      const fs::path before = run_dir / "trace" / fmt::format("before_resume_v{}.h5", resume_version);
      fs::rename(merged, before);
      inputs.push_back(before.string());
    }
    for (int r = 0; r < world.size(); ++r)
      inputs.push_back((run_dir / "trace" / fmt::format("rank_{}.h5", r)).string());
    // Spawned pools' ranks wrote their own files; one killed mid-run may have left an unreadable one.
    for (const auto& entry : fs::directory_iterator(run_dir / "trace")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("spawn", 0) != 0) continue;
      try {
        io::readTraceEvents(entry.path().string());
        inputs.push_back(entry.path().string());
      } catch (const std::exception& e) {
        spdlog::warn("trace: {} left out of trace.h5: {}", entry.path().string(), e.what());
      }
    }
    io::mergeTraceFiles(inputs, merged.string());
  }
  world.barrier();
  return outcome;
}

}  // namespace astraflow
