// `astraflow eval`: a progress line on stderr while the answers come, the result as one JSON
// object on stdout, the per-problem table in OUT/eval.h5.
#include "apps/eval_command.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/run/offline_eval.hpp"

namespace astraflow {

struct EvalArgs {
  std::string config, checkpoint, hf, out, log_level;
  std::vector<std::string> overrides;
};

EvalCommand addEvalCommand(CLI::App& app) {
  EvalCommand c;
  c.args = std::make_shared<EvalArgs>();
  EvalArgs& a = *c.args;
  auto* cmd = app.add_subcommand("eval",
                                 "evaluate a checkpoint or a Hugging Face folder on the config's evaluation sets "
                                 "(eval.problems, eval.sets, eval.samples, eval.temperature) without training");
  cmd->add_option("config", a.config, "YAML config")->required();
  auto* checkpoint = cmd->add_option("--checkpoint", a.checkpoint,
                                     "an astraflow checkpoint holding the config's policy (a run's "
                                     "checkpoints/step_<V>.<policy>.h5 or best.<policy>.h5, or sft.h5)");
  auto* hf = cmd->add_option("--hf", a.hf, "a Hugging Face folder of the policy (through a server pool: required)");
  checkpoint->excludes(hf);
  cmd->add_option("--out", a.out, "folder for eval.h5, the per-problem table (default: none written)");
  cmd->add_option("--log-level", a.log_level, "override run.log_level");
  cmd->add_option("--set", a.overrides, "override a config key: key.path=value (repeatable)");
  c.command = cmd;
  return c;
}

int EvalCommand::run() const {
  if (!command || !*command) return -1;
  const EvalArgs& a = *args;
  try {
    Config cfg = loadConfig(a.config, a.overrides);
    if (!a.log_level.empty()) {
      const auto level = enumByName(kLogLevelNames, a.log_level);
      if (!level) {
        std::string allowed;
        for (const auto& n : kLogLevelNames) allowed += (allowed.empty() ? "" : ", ") + std::string(n.name);
        throw Error("--log-level: given '" + a.log_level + "'; allowed: " + allowed);
      }
      cfg.run.log_level = *level;
    }
    initLogging(0, "eval", cfg.run.log_level);
    OfflineEvalOptions o{a.checkpoint, a.hf, a.out, {}};
    const auto t0 = std::chrono::steady_clock::now();
    o.progress = [t0](std::size_t done, std::size_t total) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "eval: %zu/%zu answers, %.1f s\n", done, total, s);
    };
    std::printf("%s\n", evaluateOffline(cfg, o).json().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 1;
  }
}

}  // namespace astraflow
