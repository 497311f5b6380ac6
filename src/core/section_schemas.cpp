// The sections declared as schemas (config_schema.hpp), but for those of the model-holding
// roles (role_schemas.cpp) and dataflow (beside its parser, dataflow_config.cpp): run, sft, eval,
// weights, cross_site, elastic and local; and the list of every declared section, in
// docs/configuration.md's order.
#include "core/section_schemas.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/dataflow_config.hpp"
#include "core/environment_config.hpp"
#include "core/layout_config.hpp"
#include "core/simulation_config.hpp"
#include "core/workflow_config.hpp"

namespace astraflow {

namespace detail {

namespace {
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// "host:port", port 0-65535 (empty: not set).
bool isAddress(const std::string& value) {
  const auto colon = value.rfind(':');
  return value.empty() || (colon != std::string::npos && colon != 0 && colon + 1 != value.size() &&
                           value.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                           value.size() - colon - 1 <= 5 && std::stoul(value.substr(colon + 1)) <= 65535);
}
}  // namespace

const SectionSchema<RunSection>& runSchema() {
  static const auto schema =
      SectionSchema<RunSection>("run")
          .text("name", &RunSection::name, "`[A-Za-z0-9_-]{1,64}`", "name of the run")
          .textFrom(
              "output_dir", &RunSection::output_dir, [](const RunSection& r) { return "runs/" + r.name; }, "path",
              "the run folder (traces, checkpoints, summary)", "`runs/<name>`")
          .integer("seed", &RunSection::seed, 0, std::numeric_limits<std::int64_t>::max(), "",
                   "base seed of every random stream")
          .choice("log_level", &RunSection::log_level, kLogLevelNames, "log level; `--log-level` overrides")
          .integer("threads_per_rank", &RunSection::threads_per_rank, 0, 1024, "threads",
                   "LibTorch/OpenBLAS threads per rank; 0 = cores on the node ÷ ranks on the node. "
                   "`trainer.threads` and `rollout.threads` set a role's own")
          .choice("mode", &RunSection::mode, kRunModeNames,
                  "`async`: the dataflow runtime with bounded staleness; `sync`: the colocated-synchronous "
                  "baseline (rollouts for one batch with the current weights, then one step, then the next batch) "
                  "on the same ranks, for comparisons")
          .integer("versions", &RunSection::versions, 1, kMaxInt, "versions",
                   "the run ends once every policy's trainer has published this version")
          .number("max_wall_seconds", &RunSection::max_wall_seconds, 0.0, 1e9, "seconds",
                  "after this long (per segment: a resumed run gets its own budget) the dataflow rank stops "
                  "serving new batches; the batches already served are trained, then the final evaluation, "
                  "checkpoint and summary follow",
                  "0 = none")
          .integer("checkpoint_every", &RunSection::checkpoint_every, 0, kMaxInt, "versions",
                   "checkpoint every K versions, plus one at the end (`<run>/checkpoints/step_<V>.*`); a trainer "
                   "checkpoint its filesystem cannot hold is skipped and counted (docs/runtime-notes.md)",
                   "0 = final only")
          .boolean("keep_best", &RunSection::keep_best,
                   "after the run, the trainer checkpoint of the evaluation round with the best mean accuracy over "
                   "the eval sets (a version > 0; the earliest on a tie) is kept as "
                   "`<run>/checkpoints/best.<policy>.h5` (a hard link, or a copy) with `best.json` naming its "
                   "version and scores; needs evaluation and `checkpoint_every` dividing `eval.every`")
          .integer("keep_checkpoints", &RunSection::keep_checkpoints, 0, kMaxInt, "checkpoints",
                   "the newest complete checkpoints kept: as each checkpoint completes, the dataflow rank removes "
                   "the files of older ones (never the newest complete one, one being written, or under "
                   "`keep_best` the best evaluated version or one whose evaluation is still running); at 8B a "
                   "trainer file with its AdamW state is ~100 GB per policy",
                   "0 = every one")
          .number("flush_seconds", &RunSection::flush_seconds, 0.0, 1e6, "seconds",
                  "trace events, trajectories and each rank's report (`trace/rank_<r>.report`) reach their files "
                  "at least this often (and every 256 records), so a killed run leaves what it did up to the last "
                  "flush; `astraflow trace RUN` reads such a run from its per-rank files",
                  "0 = by count only")
          .choice("memory_check", &RunSection::memory_check, kMemoryCheckNames,
                  "the memory plan at the start (docs/memory.md): every rank's estimate, summed per node against "
                  "its available memory; `refuse` stops a run that does not fit with one message naming the "
                  "largest items and the keys that shrink them, `warn` logs it and starts, `off` skips it")
          .integer("export_hf_every", &RunSection::export_hf_every, 0, kMaxInt, "versions",
                   "each trainer group also writes its policy as a Hugging Face folder every K versions and at the "
                   "end (`<run>/hf/<policy>_step_<V>/`, written as `.tmp` then renamed; a failed export is a "
                   "warning, the checkpoint stays); such versions are checkpointed too",
                   "0 = none")
          .integer("progress_every", &RunSection::progress_every, 1, kMaxInt, "versions",
                   "one progress line on stderr every K versions (per policy)")
          .text("init_checkpoint", &RunSection::init_checkpoint, "path",
                "warm start for every policy; empty: `sft.checkpoint` (`<output_dir>/sft.h5`) when that file "
                "exists, else random weights with a warning. A path that does not exist is an error.")
          .rule("run_name", "`name` is 1-64 characters of `[A-Za-z0-9_-]` (it names files and the run)",
                [](YamlReader& r, const RunSection& run) { requireIdentifier(r, "name", run.name); });
  return schema;
}

const SectionSchema<CrossSiteSection>& crossSiteSchema() {
  using C = CrossSiteSection;
  static const auto schema =
      SectionSchema<C>("cross_site")
          .text("listen", &C::listen, "`host:port`",
                "home job: the dataflow rank accepts gateways here (port 0: any free port, logged). Empty: no "
                "remote sites")
          .text("connect", &C::connect, "`host:port`",
                "remote job (required with a `gateway` layout entry): the home dataflow rank's address")
          .text("site", &C::site, "1-64 of `[A-Za-z0-9_-]`",
                "remote job: this site's name in logs and the home summary")
          .text("token_env", &C::token_env, "variable name",
                "environment variable holding the shared secret (preferred over `token`): the key of the link's "
                "challenge-response and frame tags, never sent (docs/cross-site.md)")
          .text("token", &C::token, "", "the shared secret itself, when no environment variable is set")
          .integer("wait_for_sites", &C::wait_for_sites, 0, 1024, "gateways",
                   "home: wait for this many gateways before the first task (bounded by `wait_seconds`)")
          .number("wait_seconds", &C::wait_seconds, 0.0, 86400.0, "seconds",
                  "home: how long to wait for them; gateway: how long to keep trying to reach home")
          .integer("tasks_in_flight", &C::tasks_in_flight, 1, 1 << 20, "tasks",
                   "gateway: tasks held between home and the local task ring at most (credit)")
          .integer("outbox_bytes", &C::outbox_bytes, 0, std::int64_t{1} << 40, "bytes",
                   "home: a site whose outbox (frames handed to its link, not yet sent) holds more gets no tasks "
                   "and its weight requests wait until it drains; `0` = two full versions of the largest policy + 1 "
                   "MiB")
          .number("stall_seconds", &C::stall_seconds, 0.1, 86400.0, "seconds",
                  "home: a site is declared lost (its leased tasks re-issued) when its oldest queued frame has "
                  "waited this long, or when it owes home trajectories (holds tasks) or its end and has said "
                  "nothing this long while nothing of home's is queued to it; set it above the time one full "
                  "weight version takes on the slowest link. The dataflow loop never waits on a site")
          .rule("site_name", "`site` is 1-64 characters of `[A-Za-z0-9_-]`",
                [](YamlReader& r, const C& c) { requireIdentifier(r, "site", c.site); })
          .rule("addresses", "`listen` and `connect` are `host:port` (port 0-65535) when set",
                [](YamlReader& r, const C& c) {
                  for (const auto& [key, value] : {std::pair{"listen", c.listen}, std::pair{"connect", c.connect}})
                    if (!isAddress(value)) r.fail(key, "given '" + value + "'; allowed: host:port (port 0-65535)");
                });
  return schema;
}

const SectionSchema<SftSection>& sftSchema() {
  static const auto schema =
      SectionSchema<SftSection>("sft")
          .integer("max_steps", &SftSection::max_steps, 0, 1 << 24, "steps", "stop after this many steps")
          .integer("batch_size", &SftSection::batch_size, 1, 1 << 20, "sequences", "reference episodes per step")
          .number("lr", &SftSection::lr, 0.0, 10.0, "", "learning rate during SFT")
          .number("target_accuracy", &SftSection::target_accuracy, 0.0, 1.0, "fraction",
                  "stop once held-out greedy accuracy reaches it")
          .integer("eval_every", &SftSection::eval_every, 1, 1 << 24, "steps", "evaluation period")
          .text("checkpoint", &SftSection::checkpoint, "path",
                "checkpoint written (with a multi-agent workflow: every policy of the team, each trained on its "
                "role's reference examples; later roles start from the first role's result when their models have "
                "the same shape)",
                "`<output_dir>/sft.h5`");
  return schema;
}

const SectionSchema<EvalSection>& evalSchema() {
  static const auto schema =
      SectionSchema<EvalSection>("eval")
          .integer("problems", &EvalSection::problems, 0, 1 << 20, "problems", "held-out problems per evaluation",
                   "0 = no evaluation")
          .integer("samples", &EvalSection::samples, 1, 1024, "samples",
                   "answers per problem in `astraflow run`'s evaluations: the round's accuracy is their mean reward "
                   "(pass@1 as avg@k) and pass@k the fraction of problems with an answer of full reward (summary "
                   "`eval_pass_at_k_end`, trace `eval_pass_at_k`); > 1 needs `eval.temperature` > 0")
          .number("temperature", &EvalSection::temperature, 0.0, 100.0, "",
                  "sampling temperature of evaluation answers in `astraflow run` (the field's report: `samples: 4, "
                  "temperature: 0.6`); `train-local` and `sft` always evaluate greedily",
                  "0 = greedy")
          .integer("every", &EvalSection::every, 1, 1 << 24, "steps",
                   "evaluation period of `train-local` (optimiser steps) and of `astraflow run` (weight versions). A "
                   "run evaluates at its start, every K versions and at its final version; evaluation tasks travel "
                   "the task rings like training tasks (greedy, ahead of queued training work) and are not counted "
                   "as produced trajectories")
          .custom("sets", "list of sets", "`[]`", "`{name, path, problems, samples}` each",
                  "named evaluation sets of a dataset environment, each evaluated every round beside the "
                  "environment's own held-out rows (`held_out`, when `environment.eval` or `eval_fraction` is set "
                  "and `problems` > 0) and reported on its own, with the mean over sets (summary `eval_sets`, "
                  "`<run>/eval.h5`; docs/tasks.md \"Evaluation\"). `name`: `[A-Za-z0-9_-]{1,64}`, unique; `path`: "
                  "a file or a list, read as `environment.train`; `problems`: the set's first rows a round takes "
                  "(0 = every row); `samples`: answers per problem (0 = `eval.samples`)",
                  [](YamlReader& r, EvalSection& e) { readEvalSets(r, e.sets); })
          .rule("sampled_answers",
                "`samples` > 1 (or a set's) needs `temperature` > 0 (greedy answers are all the same)",
                [](YamlReader& r, const EvalSection& e) {
                  if (e.samples > 1 && e.temperature == 0.0)
                    r.fail("samples",
                           fmt::format("is {} with eval.temperature 0 (greedy), which gives one answer {} times; set "
                                       "eval.temperature (e.g. 0.6) or eval.samples: 1",
                                       e.samples, e.samples));
                  for (const auto& set : e.sets) {
                    if (set.samples > 1 && e.temperature == 0.0)
                      r.fail("sets", fmt::format("set '{}' asks for {} samples with eval.temperature 0 (greedy); set "
                                                 "eval.temperature (e.g. 0.6) or the set's samples: 1",
                                                 set.name, set.samples));
                  }
                });
  return schema;
}

const SectionSchema<WeightsSection>& weightsSchema() {
  static const auto schema =
      SectionSchema<WeightsSection>("weights")
          .choice("mode", &WeightsSection::mode, kWeightsModeNames,
                  "`full`: a rollout rank pulls the whole bf16 version; `delta`: the weight store also encodes each "
                  "version as a sparse bf16 delta against the previous one (changed elements only, bit-exact, "
                  "checksummed) and readers that are close behind apply deltas in place")
          .integer("full_sync_every", &WeightsSection::full_sync_every, 1, 1 << 20, "versions",
                   "a reader applies at most this many deltas in a row, then pulls a full version")
          .integer("delta_log", &WeightsSection::delta_log, 1, 64, "versions",
                   "deltas the store keeps per policy; a reader further behind pulls a full version. The log's ring "
                   "takes one version's bytes of the dataflow rank's memory per policy")
          .choice("compression", &WeightsSection::compression, kWeightsCompressionNames,
                  "zstd (level 1) on top of the delta encoding, kept only when smaller")
          .integer("encode_threads", &WeightsSection::encode_threads, 0, 64, "threads",
                   "threads of the dataflow rank's delta encode (zstd's workers too); `0`: the cores the rank may "
                   "run on (its affinity mask, as mpirun binds it), at most 8. The encode runs on the store's worker "
                   "thread, off the dataflow loop")
          .integer("pull_every", &WeightsSection::pull_every, 1, 1 << 20, "versions",
                   "a rollout rank pulls once the store is at least this many versions ahead of it (between batches "
                   "of episodes); a task that needs a newer version (sync mode, evaluation) always pulls")
          .integer("relay_fanout", &WeightsSection::relay_fanout, 0, 64, "nodes",
                   "versions travel between nodes as a tree: the first node's rollout ranks pull a version (full, "
                   "or its deltas) from the store and every node passes it on to at most this many others, which "
                   "read it from the node's shared copy or, in delta mode, from the ring of deltas the node applied "
                   "(a quarter of a version's bytes on each node with children; docs/weights.md, \"Relayed between "
                   "nodes\"); `0` (the default): every node pulls from the store. Worth it with many nodes on RDMA; "
                   "without RDMA each relayed read waits for the relaying rank's next loop step");
  return schema;
}

const SectionSchema<ElasticSection>& elasticSchema() {
  static const auto schema =
      SectionSchema<ElasticSection>("elastic")
          .integer("every", &ElasticSection::every, 0, 1 << 20, "versions",
                   "K: a balance report every K versions of the first policy, in the log and as "
                   "`<run>/balance/report_<V>.json`; 0: none")
          .number("tau_low", &ElasticSection::tau_low, 0.0, 1.0, "",
                  "trainer wait fraction below which the pool is over-allocated (scale down)")
          .number("tau_high", &ElasticSection::tau_high, 0.0, 1.0, "",
                  "wait fraction above which the trainer starves (scale up)")
          .number("rho", &ElasticSection::rho, 0.01, 100.0, "", "shrink margin of the scale-down target")
          .integer("g_min", &ElasticSection::g_min, 1, 1 << 20, "rollout ranks", "lower bound of G_target")
          .integer("g_max", &ElasticSection::g_max, 1, 1 << 20, "rollout ranks", "upper bound of G_target")
          .choice("mode", &ElasticSection::mode, kElasticModeNames,
                  "`auto`: spawn / retire rollout ranks to follow G_target; `external`: a maintainer command (or "
                  "target file) decides; mpirun needs `--enable-recovery`; spawned ranks take the first rollout "
                  "pool's backend, so not with an http pool")
          .text("command", &ElasticSection::command, "shell command",
                "external: run with the report's JSON path as last argument; the last stdout line is the target "
                "size")
          .number("command_timeout_s", &ElasticSection::command_timeout_s, 0.1, 3600.0, "seconds",
                  "external: the command is killed after this; the pool keeps its size")
          .text("target_file", &ElasticSection::target_file, "path",
                "external without a command: a file holding the target size, read at each report",
                "`<run>/balance/target`")
          .number("lease_seconds", &ElasticSection::lease_seconds, 0.5, 86400.0, "seconds",
                  "a spawned pool silent this long while holding tasks is lost; its tasks are re-issued")
          .integer("spawn_max", &ElasticSection::spawn_max, 1, 1024, "ranks", "ranks one spawn adds at most")
          .rule("reports_for_decisions",
                "a `mode` other than `off` needs `every` ≥ 1 (decisions come with the reports)",
                [](YamlReader& r, const ElasticSection& e) {
                  if (e.mode != ElasticMode::Off && e.every == 0)
                    r.fail("every", fmt::format("0 with mode {}; allowed: >= 1 (decisions come with the reports)",
                                                enumName(kElasticModeNames, e.mode)));
                })
          .rule("dead_band", "`tau_low` ≤ `tau_high`",
                [](YamlReader& r, const ElasticSection& e) {
                  if (e.tau_low > e.tau_high)
                    r.fail("tau_low",
                           fmt::format("given {} above tau_high {}; allowed: tau_low <= tau_high (the dead band)",
                                       e.tau_low, e.tau_high));
                })
          .rule("pool_bounds", "`g_max` ≥ `g_min`", [](YamlReader& r, const ElasticSection& e) {
            if (e.g_max < e.g_min) r.fail("g_max", fmt::format("given {}; allowed: >= g_min ({})", e.g_max, e.g_min));
          });
  return schema;
}

const SectionSchema<LocalSection>& localSchema() {
  static const auto schema =
      SectionSchema<LocalSection>("local")
          .integer("steps", &LocalSection::steps, 0, 1 << 24, "steps", "optimiser steps")
          .number("max_wall_seconds", &LocalSection::max_wall_seconds, 0.0, 1e9, "seconds", "stop after this wall time",
                  "0 = no limit")
          .text("init_checkpoint", &LocalSection::init_checkpoint, "path",
                "warm start; an explicit path that does not exist is an error", "`<sft.checkpoint>` if present");
  return schema;
}

}  // namespace detail

std::vector<SectionDoc> configSchemaDocs() {
  using namespace detail;
  return {runSchema().doc(),     policySchema().doc(),    modelSchema().doc(),       layoutEntrySchema().doc(),
          backendSchema().doc(), dataflowSchema().doc(),  environmentSchema().doc(), workflowDoc(),
          rolloutSchema().doc(), trainerSchema().doc(),   sftSchema().doc(),         evalSchema().doc(),
          weightsSchema().doc(), crossSiteSchema().doc(), elasticSchema().doc(),     localSchema().doc()};
}

}  // namespace astraflow
