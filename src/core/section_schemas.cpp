// The sections declared as schemas: run, dataflow, rollout, cross_site, trainer (with trainer.loss), sft, eval,
// weights, elastic and local (the others are still read by hand in config.cpp and its siblings, and documented by
// hand).
#include "core/section_schemas.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/dataflow_config.hpp"
#include "core/layout_config.hpp"
#include "core/simulation_config.hpp"

namespace astraflow {

namespace detail {

namespace {
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();
}  // namespace

void readDevice(YamlReader& r, ComputeOptions& c) {
  const std::string device = r.getString("device", c.device.text());
  if (!parseDeviceRequest(device, c.device))
    r.fail("device", "given '" + device + "'; allowed: cpu, cuda, cuda:N (N = a GPU index on the node)");
}

void readPrecision(YamlReader& r, ComputeOptions& c) {
  c.precision = r.getEnum("precision", Precision::Auto, kPrecisionNames);
}

void readThreads(YamlReader& r, ComputeOptions& c) {
  c.threads = static_cast<int>(r.getInt("threads", c.threads, 0, 1024, "threads"));
}

const SectionSchema<RunSection>& runSchema() {
  static const auto schema =
      SectionSchema<RunSection>("run")
          .text("name", &RunSection::name, "`[A-Za-z0-9_-]{1,64}`", "name of the run")
          .textFrom(
              "output_dir", &RunSection::output_dir, [](const RunSection& r) { return "runs/" + r.name; }, "path",
              "the run folder (traces, checkpoints, summary)", "`runs/<name>`")
          .integer("seed", &RunSection::seed, 0, std::numeric_limits<std::int64_t>::max(), "",
                   "base seed of every random stream")
          .textChoice("log_level", &RunSection::log_level, {"trace", "debug", "info", "warn", "error"},
                      "log level; `--log-level` overrides")
          .integer("threads_per_rank", &RunSection::threads_per_rank, 0, 1024, "threads",
                   "LibTorch/OpenBLAS threads per rank; 0 = cores on the node ÷ ranks on the node. "
                   "`trainer.threads` and `rollout.threads` set a role's own")
          .choice("mode", &RunSection::mode, kRunModeNames,
                  "`async`: the dataflow runtime with bounded staleness; `sync`: the colocated-synchronous "
                  "baseline (rollouts for one batch with the current weights, then one step, then the next batch) "
                  "on the same ranks, for comparisons")
          .integer("versions", &RunSection::versions, 1, kMaxInt, "weight versions",
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
                [](YamlReader& r, const RunSection& run) {
                  if (!isIdentifier(run.name))
                    r.fail("name", "given '" + run.name + "'; allowed: 1-64 characters of [A-Za-z0-9_-]");
                });
  return schema;
}

const SectionSchema<RolloutSection>& rolloutSchema() {
  using R = RolloutSection;
  static const auto schema =
      SectionSchema<R>("rollout")
          .integer("group_size", &R::group_size, 1, 4096, "samples", "GRPO group")
          .number("temperature", &R::temperature, 1e-3, 100.0, "",
                  "sampling temperature; behaviour log-probs are under the temperature-scaled distribution, and "
                  "the trainer scores with the same temperature")
          .number("top_p", &R::top_p, 1e-3, 1.0, "", "nucleus sampling")
          .integer("max_new_tokens", &R::max_new_tokens, 1, 1 << 20, "tokens", "the cap on tokens per agent turn")
          .number("max_new_tokens_growth", &R::max_new_tokens_growth, 0.0, 1e6, "tokens per version",
                  "the training cap grows by this many tokens per weight version (within `max_seq_len`): a "
                  "workload whose generations lengthen over the run, as long-reasoning RL runs do "
                  "(`profiling/bench_autoscale.sh`); evaluation keeps the base cap")
          .number("min_new_tokens_growth", &R::min_new_tokens_growth, 0.0, 1e6, "tokens per version",
                  "training episodes cannot stop before this many tokens per weight version (stop tokens are "
                  "masked until then; the behaviour log-probs are those of the masked distribution): with "
                  "`max_new_tokens_growth`, generations that really lengthen, for benchmarks")
          .integer("batch_tasks", &R::batch_tasks, 1, 1 << 20, "tasks",
                   "most tasks a RaaS rank holds at once: on the engine backend with a single-agent environment, "
                   "episodes running one by one (a new one starts as soon as one ends); otherwise a batch for one "
                   "generate call (docs/rollout-backends.md)")
          .integer("max_running", &R::max_running, 1, 1 << 16, "sequences",
                   "the continuous engine: sequences stepped together; one that ends leaves at once and a waiting "
                   "one is admitted (docs/rollout-backends.md, \"The continuous engine\")")
          .integer("kv_cache_bytes", &R::kv_cache_bytes, 0, std::int64_t{1} << 50, "bytes",
                   "the engine's KV block pool; 0: enough for `max_running` full contexts, at most a quarter of the "
                   "host's memory (never less than one full context). Too small is a config error naming the least "
                   "size",
                   "0 or at least one full context")
          .integer("kv_block_size", &R::kv_block_size, 1, 4096, "token positions",
                   "positions per KV block: the unit of allocation and of prompt sharing")
          .integer("max_prefill_tokens", &R::max_prefill_tokens, 1, std::int64_t{1} << 30, "tokens",
                   "padded positions (rows × longest) one prefill forward takes; a longer single context is "
                   "prefilled alone")
          .boolean("prepacked_weights", &R::prepacked_weights,
                   "a CPU engine in fp32: its linear layers compute from their weights packed once in MKL's GEMM "
                   "layout (q, k, v as one product; gate and up as one; the head), repacked when a version arrives, "
                   "instead of MKL repacking every weight at every step: 1.3–1.4× the decode tokens/s of a "
                   "Qwen3-0.6B-shaped model at batch 4–16, 1.0–1.3× at 64, for a packed copy of 1.6× the weights' "
                   "bytes (counted in the memory plan). Products under 1 M weight elements are never packed. No "
                   "effect on bf16 or CUDA engines, or where LibTorch has no MKL (docs/performance.md, \"Prepacked "
                   "weights\")")
          .integer("environment_threads", &R::environment_threads, -1, 256, "threads (-1: auto, 0: the rank's thread)",
                   "threads that run the environment's work (resets, answers to turns: server round trips, tool "
                   "calls, reward programs) while the engine steps the other episodes, on the per-episode path; "
                   "`-1`: 8 where the environment waits on other processes or servers (`openenv`, "
                   "`code_interpreter`, MCP tools, `command`/`http`/`code` rewards), else 0 (the rank's thread) "
                   "(docs/rollout-backends.md)")
          // Its default follows run.mode: parseConfig sets it before this section is read.
          .custom("on_new_version", "string", "`continue` (async), `finish` (sync)", "`finish\\|continue\\|abort`",
                  "the engine backend: what running sequences do when the rank pulls a new version. `continue`: "
                  "they go on under the new weights from the next step, their K/V recomputed, each token recording "
                  "its version; `abort`: the same on the engine; `finish`: the pull waits until they end "
                  "(docs/rollout-backends.md, \"Generation across versions\"). The http backend's is `update_mode`",
                  [](YamlReader& r, R& s) {
                    s.on_new_version = r.getEnum("on_new_version", s.on_new_version, kOnNewVersionNames);
                  })
          .custom("device", "string", "`cpu`", "`cpu\\|cuda\\|cuda:N`",
                  "where each rollout rank's engine (weights, KV cache, sampling) runs; plain `cuda`: the GPU of "
                  "the rank's node-local slot modulo the visible GPUs (docs/gpu.md). Refused by `astraflow "
                  "validate` and at start on a machine without a GPU",
                  [](YamlReader& r, R& s) { readDevice(r, s.compute); })
          .custom("precision", "string", "`auto`", "`auto\\|fp32\\|bf16`",
                  "the engine's weight and KV-cache dtype; `auto`: bf16 on CUDA; on the CPU bf16 for a model of "
                  "100 M parameters or more when the CPU has bf16 instructions (AVX-512 BF16 or AMX: 2.6–2.8× "
                  "fp32's tokens/s at the Qwen3-0.6B shape, docs/performance.md), else fp32 (small models run "
                  "faster in fp32). A bf16 CPU engine computes from its node's shared copy of the weights in place "
                  "(docs/weights.md). The weights it receives are bf16 either way",
                  [](YamlReader& r, R& s) { readPrecision(r, s.compute); })
          .custom("threads", "integer", "`0`", "threads, 0–1024",
                  "LibTorch/OpenBLAS threads of each rollout rank; `0`: `run.threads_per_rank`'s rule",
                  [](YamlReader& r, R& s) { readThreads(r, s.compute); });
  return schema;
}

// "host:port", port 0-65535 (empty: not set).
bool isAddress(const std::string& value) {
  const auto colon = value.rfind(':');
  return value.empty() || (colon != std::string::npos && colon != 0 && colon + 1 != value.size() &&
                           value.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                           value.size() - colon - 1 <= 5 && std::stoul(value.substr(colon + 1)) <= 65535);
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
                [](YamlReader& r, const C& c) {
                  if (!isIdentifier(c.site))
                    r.fail("site", "given '" + c.site + "'; allowed: 1-64 characters of [A-Za-z0-9_-]");
                })
          .rule("addresses", "`listen` and `connect` are `host:port` (port 0-65535) when set",
                [](YamlReader& r, const C& c) {
                  for (const auto& [key, value] : {std::pair{"listen", c.listen}, std::pair{"connect", c.connect}})
                    if (!isAddress(value)) r.fail(key, "given '" + value + "'; allowed: host:port (port 0-65535)");
                });
  return schema;
}

const SectionSchema<LossSection>& lossSchema() {
  static const auto schema =
      SectionSchema<LossSection>("trainer.loss")
          .choice("kind", &LossSection::kind, kLossKindNames,
                  "PPO-clip against the behaviour policy, or decoupled PPO (ratio against the proximal policy, "
                  "weighted by π_prox/π_behav)")
          .number("clip_low", &LossSection::clip_low, 0.0, 1.0, "", "ratio clipped to [1 − clip_low, 1 + clip_high]")
          .number("clip_high", &LossSection::clip_high, 0.0, 10.0, "", "see `clip_low`")
          .number("kl_coef", &LossSection::kl_coef, 0.0, 100.0, "",
                  "KL penalty to a frozen reference (the weights at the start of training); 0 = off")
          .choice("kl_estimator", &LossSection::kl_estimator, kKlEstimatorNames, "per-token KL estimator")
          .boolean("m2po", &LossSection::m2po,
                   "M2PO: mask the tokens with the largest Δ² until the mean Δ² of the kept tokens ≤ `m2_threshold`")
          .number("m2_threshold", &LossSection::m2_threshold, 0.0, 100.0, "", "τ of M2PO")
          .choice("advantage", &LossSection::advantage, kAdvantageNames,
                  "GRPO normalisation: by the group's std, or by the batch's std")
          .boolean("scale_by_std", &LossSection::scale_by_std, "divide group-centred rewards by the group std");
  return schema;
}

const SectionSchema<TrainerSection>& trainerSchema() {
  using T = TrainerSection;
  static const auto schema =
      SectionSchema<T>("trainer")
          .number("lr", &T::lr, 0.0, 10.0, "", "AdamW learning rate (the peak, with a schedule)")
          .choice("lr_schedule", &T::lr_schedule, kLrScheduleNames,
                  "the rate by optimiser step: a linear warm-up over `warmup_steps`, then constant, or "
                  "linear/cosine decay to `lr_floor × lr` at `decay_steps` (docs/training.md). The step is AdamW's "
                  "own count, kept in checkpoints: a resumed run continues the schedule")
          .integer("warmup_steps", &T::warmup_steps, 0, 1 << 30, "optimiser steps",
                   "linear warm-up from `lr / warmup_steps` to `lr`")
          .number("lr_floor", &T::lr_floor, 0.0, 1.0, "fraction of `lr`", "where the decay ends")
          .integer("decay_steps", &T::decay_steps, 0, 1 << 30, "optimiser steps",
                   "the schedule's length; 0: `run.versions × ppo_epochs × mini_batches` (`train-local`: "
                   "`local.steps × ppo_epochs × mini_batches`)")
          .number("beta1", &T::beta1, 0.0, 0.999999, "", "AdamW's first-moment decay")
          .number("beta2", &T::beta2, 0.0, 0.999999, "", "AdamW's second-moment decay")
          .number("weight_decay", &T::weight_decay, 0.0, 10.0, "", "AdamW decoupled weight decay")
          .number("grad_clip", &T::grad_clip, 0.0, 1e6, "global L2 norm", "gradient clipping", "0 = off")
          .integer("groups_per_step", &T::groups_per_step, 1, 1 << 20, "groups",
                   "prompts per RL step (× `group_size` samples)")
          .integer("ppo_epochs", &T::ppo_epochs, 1, 64, "passes",
                   "passes over each RL batch (the clip bounds the later steps)")
          .integer("mini_batches", &T::mini_batches, 1, 1024, "optimiser steps per pass",
                   "PPO mini-batches: each pass visits the batch in a fresh shuffled order cut into this many "
                   "slices, one optimiser step each; behaviour and proximal log-probs and advantages are the "
                   "batch's (docs/training.md)")
          .integer("micro_batch_tokens", &T::micro_batch_tokens, 0, std::int64_t{1} << 40, "tokens",
                   "gradient accumulation: a step's sequences go through the model in micro-batches of at most this "
                   "many tokens (lines × longest sequence), longest first; the loss stays the token-mean over the "
                   "whole step. A longer sequence goes alone",
                   "0 = off")
          .boolean("packing", &T::packing,
                   "sequence packing: a micro-batch's sequences share lines as wide as its longest one (first fit), "
                   "each attending only to itself with positions from 0; same loss as padded, less padding "
                   "(`forward_tokens` vs `sequence_tokens` in the summary)")
          .boolean("shared_prefix", &T::shared_prefix,
                   "the rows of a group go through the forward as a tree: the tokens they all start with (a GRPO "
                   "group's prompt, a multi-turn group's common history) once, each row's own tokens after it, "
                   "attending to the prefix and to themselves — the same log-probs and gradients as each row alone, "
                   "to float rounding, for far fewer forward tokens (docs/training.md). Trees go first-fit into "
                   "lines even when `packing` is off")
          .boolean("activation_checkpointing", &T::activation_checkpointing,
                   "keep only each transformer block's input in the forward and recompute the block in the "
                   "backward: same gradients, less activation memory, about one more forward per step")
          .integer("logits_chunk_bytes", &T::logits_chunk_bytes, 0, std::int64_t{1} << 40, "bytes",
                   "log-probs (the loss's, the KL reference's) are computed from the hidden states with about this "
                   "many bytes of float32 logits at a time, and the backward recomputes each chunk: at Qwen3's "
                   "151,936-token vocabulary a micro-batch of 2,048 tokens never holds its 1.2 GB logits tensor. 0: "
                   "every token at once")
          .custom("device", "string", "`cpu`", "`cpu\\|cuda\\|cuda:N`",
                  "where each trainer rank's model, optimiser and loss live (as `rollout.device`); `train-local` "
                  "and `sft` run their one model here too",
                  [](YamlReader& r, T& t) { readDevice(r, t.compute); })
          .custom("precision", "string", "`auto`", "`auto\\|fp32\\|bf16`",
                  "compute dtype: `bf16` runs forward and backward under autocast to bf16; master weights and "
                  "AdamW state stay fp32. `auto`: bf16 on CUDA, fp32 on the CPU",
                  [](YamlReader& r, T& t) { readPrecision(r, t.compute); })
          .custom("threads", "integer", "`0`", "threads, 0–1024",
                  "LibTorch/OpenBLAS threads of each trainer rank; `0`: `run.threads_per_rank`'s rule. A trainer "
                  "that works while its node's rollout ranks mostly wait (the text demo) gains from more than an "
                  "even share of the cores",
                  [](YamlReader& r, T& t) { readThreads(r, t.compute); })
          .custom("simulate", "mapping", "absent",
                  "`{fixed_seconds, seconds_per_token, weight_bytes, changed_fraction}`",
                  "docs/simulation.md: the trainer consumes real batches but sleeps `fixed_seconds + "
                  "seconds_per_token × forward tokens` instead of a backward pass (the tokens its share's forward "
                  "passes would hold, micro-batched and padded as `micro_batch_tokens`, `packing` and "
                  "`shared_prefix` say, every mini-batch and PPO epoch), and publishes synthetic weight versions "
                  "of `weight_bytes` (0: the model's packed size; even), `changed_fraction` (default 0.05) of "
                  "their bf16 words changed per version. Every rollout pool must then have `backend: {kind: "
                  "simulated}`",
                  [](YamlReader& r, T& t) {
                    if (r.has("simulate")) parseTrainerSimulation(r.child("simulate"), t.simulate);
                  })
          .choice("grad_sync", &T::grad_sync, kGradSyncNames,
                  "how a data-parallel group averages gradients: `auto` is NCCL on CUDA and MPI on the CPU (faster "
                  "than Gloo within a node: docs/performance.md); `c10d` a c10d process group (Gloo on the CPU, "
                  "NCCL on CUDA; rendezvous through a TCPStore on the group's first rank, address shared over MPI; "
                  "`ASTRAFLOW_C10D_HOST` overrides the host it announces, `GLOO_SOCKET_IFNAME` the interface Gloo "
                  "uses), or MPI reduce-to-rank-0 + broadcast over the group's communicator. Both give every rank "
                  "bit-identical gradients")
          .choice("sharding", &T::sharding, kShardingNames,
                  "`optimizer`: ZeRO-1 over the policy's data-parallel trainer group — each rank keeps AdamW's "
                  "state for one 1/N shard of the flattened parameters; gradients are reduce-scattered, parameters "
                  "all-gathered, over `grad_sync`'s transport (`auto`: MPI on the CPU, NCCL on CUDA; `c10d`: Gloo "
                  "or NCCL; `mpi`). `parameters`: FSDP-style — each transformer block's weights, gradients and "
                  "AdamW state are sharded too, a block is gathered for its forward and again for its backward "
                  "(which recomputes it, as activation checkpointing does) and freed after; the embeddings, final "
                  "norm and output head stay whole on every rank with their AdamW state sharded. Refused with "
                  "`trainer.loss.kl_coef > 0` (the frozen reference is not sharded). Checkpoints keep the "
                  "unsharded format (rank 0 gathers weights and state), so a run resumes with any group size and "
                  "any sharding (docs/training.md). No effect with one trainer rank")
          .nested("loss", &T::loss, lossSchema())
          .rule("sharded_kl_reference",
                "`sharding: parameters` needs `loss.kl_coef` 0 (the frozen KL reference is not sharded)",
                [](YamlReader& r, const T& t) {
                  if (t.sharding == T::Sharding::Parameters && t.loss.kl_coef > 0)
                    r.fail("sharding",
                           "parameters cannot be combined with trainer.loss.kl_coef > 0 (the frozen KL reference is "
                           "not sharded); use sharding: optimizer or kl_coef: 0");
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
          .rule("sampled_answers", "`samples` > 1 needs `temperature` > 0 (greedy answers are all the same)",
                [](YamlReader& r, const EvalSection& e) {
                  if (e.samples > 1 && e.temperature == 0.0)
                    r.fail("samples",
                           fmt::format("is {} with eval.temperature 0 (greedy), which gives one answer {} times; set "
                                       "eval.temperature (e.g. 0.6) or eval.samples: 1",
                                       e.samples, e.samples));
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
  return {runSchema().doc(),     dataflowSchema().doc(), rolloutSchema().doc(), trainerSchema().doc(),
          sftSchema().doc(),     evalSchema().doc(),     weightsSchema().doc(), crossSiteSchema().doc(),
          elasticSchema().doc(), localSchema().doc()};
}

}  // namespace astraflow
