// The `environment` section: its keys as declared (environment_schema.cpp), then what comes
// from other sections — the run's seed, the policies' tokenizer folders, the server log folder
// under the run's — and the check that needs `eval` (docs/configuration.md, docs/tasks.md).
#include "core/environment_config.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "astraflow/core/error.hpp"

namespace astraflow::detail {

namespace {

// The policies' folders, whose tokenizer and chat template the episodes are encoded with.
void policyFolders(YamlReader& r, Config& cfg) {
  DatasetTaskOptions& d = cfg.environment.dataset;
  for (const auto& p : cfg.policies) {
    if (p.model.hf_path.empty())
      r.fail("name",
             fmt::format("is {}, which encodes with the policy's own tokenizer and chat template, but policy "
                         "'{}' has no model.hf folder (make one with `astraflow init-model`, or use a Hugging Face "
                         "model folder)",
                         cfg.environment.name, p.name));
    d.tokenizer_folders.push_back(p.model.hf_path);
  }
}

}  // namespace

void parseEnvironment(YamlReader r, Config& cfg) {
  EnvironmentOptions& e = cfg.environment;
  environmentSchema().read(r, e);
  if (usesPromptDataset(e.name)) e.dataset.seed = cfg.run.seed;
  if (usesPolicyTokenizer(e.name)) policyFolders(r, cfg);
  if (e.name == "openenv") {
    const std::string log_dir = e.openenv.log_dir.empty()
                                    ? (std::filesystem::path(cfg.run.output_dir) / "openenv").string()
                                    : e.openenv.log_dir;
    e.openenv.log_dir = std::filesystem::absolute(log_dir).lexically_normal().string();
  }
}

void checkEnvironment(const Config& cfg) {
  const DatasetTaskOptions& d = cfg.environment.dataset;
  const bool dataset = usesPromptDataset(cfg.environment.name);
  if (dataset && cfg.eval.problems > 0 && cfg.eval.sets.empty() && d.eval_files.empty() && d.eval_fraction == 0.0)
    throw ConfigError(fmt::format(
        "{}: eval.problems is {} but the {} environment has no held-out rows; set environment.eval (files), "
        "environment.eval_fraction or eval.sets, or eval.problems: 0",
        cfg.source, cfg.eval.problems, cfg.environment.name));
  if (!dataset && !cfg.eval.sets.empty())
    throw ConfigError(
        fmt::format("{}: eval.sets: given with environment.name {}; allowed: a dataset environment "
                    "(dataset, code_interpreter, doc_search), whose rows the sets' files hold",
                    cfg.source, cfg.environment.name));
  if (!cfg.run.keep_best) return;
  if (!cfg.eval.enabled())
    throw ConfigError(
        fmt::format("{}: run.keep_best: true with no evaluation (eval.problems 0, no eval.sets); "
                    "allowed: false, or evaluate",
                    cfg.source));
  if (cfg.run.checkpoint_every <= 0 || cfg.eval.every % cfg.run.checkpoint_every != 0)
    throw ConfigError(
        fmt::format("{}: run.keep_best: true needs a checkpoint at every evaluated version, but "
                    "run.checkpoint_every is {} and eval.every {}; allowed: checkpoint_every > 0 "
                    "dividing eval.every (e.g. checkpoint_every: {})",
                    cfg.source, cfg.run.checkpoint_every, cfg.eval.every, cfg.eval.every));
}

}  // namespace astraflow::detail
