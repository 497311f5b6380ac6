// astraflow — the command-line program: run a job, validate a config, print layout sizes.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "apps/balance_replay.hpp"
#include "apps/env_command.hpp"
#include "apps/eval_command.hpp"
#include "apps/model_commands.hpp"
#include "apps/reward_command.hpp"
#include "apps/run_job.hpp"
#include "apps/serve_command.hpp"
#include "apps/text_commands.hpp"
#include "apps/trace_command.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/config_doc.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/model/model_setup.hpp"
#include "astraflow/run/local_loop.hpp"
#include "astraflow/run/memory_plan.hpp"
#include "astraflow/run/role_entry.hpp"
#include "astraflow/tasks/environment.hpp"

namespace {

// --log-level: one of run.log_level's names, checked by CLI11 before it is read.
CLI::IsMember logLevelNames() {
  std::vector<std::string> names;
  for (const auto& n : astraflow::kLogLevelNames) names.emplace_back(n.name);
  return CLI::IsMember(names);
}

void overrideLogLevel(astraflow::Config& cfg, const std::string& level) {
  if (!level.empty()) cfg.run.log_level = *astraflow::enumByName(astraflow::kLogLevelNames, level);
}

// Before MPI is up, the launcher's environment tells which rank this is; only rank 0 prints
// errors that every rank finds alike (a bad config), so the user reads them once.
bool firstRankByEnvironment() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v) == 0;
  }
  return true;
}

// Without a file: the generated sections of docs/configuration.md. With one: that file with its
// generated regions rewritten, on stdout, or in place with --write.
int configDocCommand(const std::string& path, bool write) {
  try {
    if (path.empty() && write) throw astraflow::Error("config-doc: --write needs the file to rewrite");
    if (path.empty()) {
      for (const auto& section : astraflow::configSchemaDocs())
        std::printf("## `%s`\n\n%s\n", section.name.c_str(), astraflow::markdownSection(section).c_str());
      return 0;
    }
    std::ifstream in(path);
    if (!in) throw astraflow::Error("config-doc: cannot read " + path);
    const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string regenerated = astraflow::regenerateConfigDoc(doc);
    if (!write) {
      std::fputs(regenerated.c_str(), stdout);
      return 0;
    }
    std::ofstream out(path, std::ios::trunc);
    out << regenerated;
    if (!out) throw astraflow::Error("config-doc: cannot write " + path);
    std::fprintf(stderr, "%s: %s\n", path.c_str(), regenerated == doc ? "unchanged" : "generated tables rewritten");
    return 0;
  } catch (const astraflow::Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

int validateCommand(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    const astraflow::Config cfg = astraflow::loadConfig(path, overrides);
    astraflow::checkDeviceRequests(cfg);
    std::printf("%s: valid (%d ranks: %zu policies, %zu layout entries)\n", path.c_str(), cfg.layoutRanks(),
                cfg.policies.size(), cfg.layout.size());
    return 0;
  } catch (const astraflow::Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

int layoutSizeCommand(const std::string& path) {
  try {
    std::printf("%d\n", astraflow::loadConfig(path).layoutRanks());
    return 0;
  } catch (const astraflow::Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

// The memory plan of every rank of the layout, as if all ran on this machine; exit 3 when it
// does not fit (the run would refuse it: run.memory_check).
int planCommand(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    const astraflow::Config cfg = astraflow::loadConfig(path, overrides);
    const astraflow::RoleMap map(cfg, cfg.layoutRanks());
    const auto vocab = astraflow::tokenSpecOf(*astraflow::makeEnvironmentTokenizer(cfg.environment)).vocab_size;
    const auto plans = astraflow::planMemory(cfg, map, vocab, astraflow::hostMemoryBytes());
    const auto node = astraflow::nodeMemory();
    std::printf("memory plan of %s, every rank on this node (docs/memory.md):\n%s", path.c_str(),
                astraflow::formatMemoryPlan(plans, node.available, node.source).c_str());
    const auto refusal = astraflow::memoryRefusal(plans, "(this one)", node.available, node.source);
    if (refusal.empty()) return 0;
    std::fprintf(stderr, "astraflow: %s\n", refusal.c_str());
    return 3;
  } catch (const astraflow::Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

// sft / train-local: one process, no MPI job; logs on stderr, one JSON line on stdout.
int localCommand(const std::string& path, const std::vector<std::string>& overrides, const std::string& log_level,
                 bool sft) {
  try {
    astraflow::Config cfg = astraflow::loadConfig(path, overrides);
    overrideLogLevel(cfg, log_level);
    astraflow::initLogging(0, sft ? "sft" : "train-local", cfg.run.log_level);
    const auto result = sft ? astraflow::runSft(cfg) : astraflow::runTrainLocal(cfg);
    std::printf("%s\n", result.json().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
}

// warm-start-path: the weights a run of this config starts from (scripts read it): a checkpoint
// file, or — every policy a Hugging Face folder and no run.init_checkpoint — the first policy's
// folder, which no script turns into an `sft` job (at 8B a single-process fp32 + AdamW job of
// ~130 GB).
int warmStartCommand(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    const auto cfg = astraflow::loadConfig(path, overrides);
    const bool all_hf = !cfg.policies.empty() && std::all_of(cfg.policies.begin(), cfg.policies.end(),
                                                             [](const auto& p) { return !p.model.hf_path.empty(); });
    // A gateway site loads no warm start (its weights come from home): an empty line.
    std::printf("%s\n", cfg.isGatewaySite()                ? ""
                        : !cfg.run.init_checkpoint.empty() ? cfg.run.init_checkpoint.c_str()
                        : all_hf                           ? cfg.policies.front().model.hf_path.c_str()
                                                           : cfg.sft.checkpoint.c_str());
    return 0;
  } catch (const astraflow::Error& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

struct RunFlags {
  std::string resume_dir, log_level;
  bool overwrite = false;
};

// run: the config is checked before any MPI work, on every rank alike.
int runCommand(int argc, char** argv, std::string config_path, const std::vector<std::string>& overrides,
               const RunFlags& flags) {
  astraflow::Config cfg;
  if (config_path.empty() && flags.resume_dir.empty()) {
    if (!firstRankByEnvironment()) return 0;  // see below
    std::fprintf(stderr, "astraflow: run needs a config file (or --resume <run>)\n");
    return 2;
  }
  if (config_path.empty()) config_path = flags.resume_dir + "/config.yaml";
  try {
    cfg = astraflow::loadConfig(config_path, overrides);
  } catch (const astraflow::Error& e) {
    // Every rank found the same error; the first reports it and fails the job. The others leave
    // quietly with 0, so mpirun does not kill the first before its message is out.
    if (!firstRankByEnvironment()) return 0;
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
  overrideLogLevel(cfg, flags.log_level);
  return astraflow::runJob(argc, argv, cfg, astraflow::RuntimeOptions{flags.resume_dir, flags.overwrite});
}

// The job's own subcommands (the model, text, reward, serve and env ones register themselves)
// and what they were given.
struct JobCommands {
  std::string config_path, log_level, resume_dir, trace_path, trace_format = "text", doc_path;
  bool overwrite = false, doc_write = false;
  int balance_every = 0;
  std::vector<std::string> overrides;
  CLI::App *spawned, *run, *validate, *plan, *layout_size, *warm_start, *trace, *sft, *train_local, *config_doc;

  void add(CLI::App& app) {
    spawned = app.add_subcommand("spawned-pool", "");  // started by MPI_Comm_spawn (elastic.mode), not by hand
    spawned->group("");
    run = app.add_subcommand("run", "run the job a config describes (under mpirun/srun)");
    run->add_option("config", config_path, "YAML config (with --resume: default <run>/config.yaml)");
    auto* resume_opt =
        run->add_option("--resume", resume_dir, "continue the run in this folder from its newest checkpoint");
    run->add_flag("--overwrite", overwrite,
                  "start over in a run.output_dir that holds another run: its checkpoints, traces and trajectories "
                  "are removed first (without it such a folder is refused)")
        ->excludes(resume_opt);
    addSet(run, "override a config key: key.path=value (repeatable)");
    run->add_option("--log-level", log_level, "override run.log_level")->check(logLevelNames());

    validate = app.add_subcommand("validate", "check a config without starting MPI");
    validate->add_option("config", config_path, "YAML config")->required();
    addSet(validate, "override a config key: key.path=value (repeatable), as run takes it");
    plan = app.add_subcommand("plan", "print a config's memory plan (every rank on this node) without running");
    plan->add_option("config", config_path, "YAML config")->required();
    addSet(plan, "override a config key: key.path=value (repeatable)");
    config_doc = app.add_subcommand("config-doc",
                                    "print the config reference the schema declares (docs/configuration.md's tables)");
    config_doc->add_option("file", doc_path,
                           "a doc with generated regions (<!-- schema: NAME -->): print it regenerated");
    config_doc->add_flag("--write", doc_write, "rewrite the file's generated regions in place");
    layout_size = app.add_subcommand("layout-size", "print the number of ranks a config's layout needs");
    layout_size->add_option("config", config_path, "YAML config")->required();
    warm_start = app.add_subcommand(
        "warm-start-path",
        "print the warm start a run of this config loads: a checkpoint, or the first policy's Hugging Face "
        "folder when every policy is one (empty for a gateway site)");
    warm_start->add_option("config", config_path, "YAML config")->required();
    addSet(warm_start, "as run's --set: the path of the run so overridden");

    trace = app.add_subcommand("trace", "print per-role tables of a run's trace.h5 (and summary.json)");
    trace->add_option("run", trace_path, "run folder, or a trace.h5 file")->required();
    trace->add_option("--format", trace_format, "text tables (default) or one JSON document")
        ->check(CLI::IsMember({"text", "json"}));
    trace
        ->add_option("--balance", balance_every,
                     "recompute the balance report (paper A.4) for every window of K versions from the trace alone")
        ->check(CLI::Range(1, 1 << 20));

    sft = app.add_subcommand("sft", "warm start: supervised training on the environment's reference solutions");
    sft->add_option("config", config_path, "YAML config")->required();
    sft->add_option("--log-level", log_level, "override run.log_level")->check(logLevelNames());
    addSet(sft, "override a config key: key.path=value (repeatable)");
    train_local = app.add_subcommand("train-local", "single-process RL reference loop");
    train_local->add_option("config", config_path, "YAML config")->required();
    train_local->add_option("--log-level", log_level, "override run.log_level")->check(logLevelNames());
    addSet(train_local, "override a config key: key.path=value (repeatable)");
  }

  // The chosen command's exit status (`run` when none of the others was chosen).
  int dispatch(int argc, char** argv) const {
    if (*sft) return localCommand(config_path, overrides, log_level, true);
    if (*train_local) return localCommand(config_path, overrides, log_level, false);
    if (*validate) return validateCommand(config_path, overrides);
    if (*config_doc) return configDocCommand(doc_path, doc_write);
    if (*layout_size) return layoutSizeCommand(config_path);
    if (*plan) return planCommand(config_path, overrides);
    if (*warm_start) return warmStartCommand(config_path, overrides);
    if (*spawned) return astraflow::runSpawnedPool(argc, argv, astraflow::runRolloutOn);
    if (*trace) {
      if (balance_every > 0) return astraflow::balanceCommand(trace_path, balance_every, trace_format);
      return astraflow::traceCommand(trace_path, trace_format);
    }
    return runCommand(argc, argv, config_path, overrides, RunFlags{resume_dir, log_level, overwrite});
  }

 private:
  void addSet(CLI::App* command, const char* help) { command->add_option("--set", overrides, help); }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"astraflow: dataflow-oriented RL training for LLM agents on MPI clusters"};
  app.require_subcommand(1);
  JobCommands job;
  job.add(app);
  const auto model_commands = astraflow::addModelCommands(app);
  const auto text_commands = astraflow::addTextCommands(app);
  const auto reward_command = astraflow::addRewardCommand(app);
  const auto serve_command = astraflow::addServeCommand(app);
  const auto env_command = astraflow::addEnvCommand(app);
  const auto eval_command = astraflow::addEvalCommand(app);

  CLI11_PARSE(app, argc, argv);

  if (const int rc = model_commands.run(); rc >= 0) return rc;
  if (const int rc = text_commands.run(); rc >= 0) return rc;
  if (const int rc = reward_command.run(); rc >= 0) return rc;
  if (const int rc = serve_command.run(); rc >= 0) return rc;
  if (const int rc = env_command.run(); rc >= 0) return rc;
  if (const int rc = eval_command.run(); rc >= 0) return rc;
  return job.dispatch(argc, argv);
}
