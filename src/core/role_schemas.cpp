// The schemas of the sections a model-holding role reads: rollout, trainer (with trainer.loss),
// the policies' model given by its sizes, and the device, precision and threads both roles take
// (config_schema.hpp; docs/configuration.md's tables are generated from them); and each entry of
// `policies`, whose model is a Hugging Face folder or given by its sizes.
#include <fmt/format.h>

#include <limits>

#include "astraflow/core/hf_model_config.hpp"
#include "core/layout_config.hpp"
#include "core/section_schemas.hpp"
#include "core/simulation_config.hpp"

namespace astraflow::detail {

namespace {

void readDevice(YamlReader& r, ComputeOptions& c) {
  const std::string device = r.getString("device", c.device.text());
  if (!parseDeviceRequest(device, c.device))
    r.fail("device", "given '" + device + "'; allowed: cpu, cuda, cuda:N (N = a GPU index on the node)");
}

void readPrecision(YamlReader& r, ComputeOptions& c) {
  c.precision = r.getEnum("precision", c.precision, kPrecisionNames);
}

constexpr int kMaxThreads = 1024;

void readThreads(YamlReader& r, ComputeOptions& c) {
  c.threads = static_cast<int>(r.getInt("threads", c.threads, 0, kMaxThreads, "threads"));
}

// device, precision and threads: what a model-holding role computes on (its ComputeOptions).
template <class S>
SectionSchema<S>& computeKeys(SectionSchema<S>& s, ComputeOptions S::*compute, const char* device,
                              const char* precision, const char* threads) {
  using Shown = typename SectionSchema<S>::Shown;
  const Shown device_default = [compute](const S& d) { return "`" + (d.*compute).device.text() + "`"; };
  const Shown precision_default = [compute](const S& d) {
    return "`" + std::string(enumName(kPrecisionNames, (d.*compute).precision)) + "`";
  };
  const Shown threads_default = [compute](const S& d) { return "`" + std::to_string((d.*compute).threads) + "`"; };
  s.custom("device", "string", device_default, "`cpu\\|cuda\\|cuda:N`", device,
           [compute](YamlReader& r, S& x) { readDevice(r, x.*compute); })
      .custom("precision", "string", precision_default, namesText(kPrecisionNames), precision,
              [compute](YamlReader& r, S& x) { readPrecision(r, x.*compute); })
      .custom("threads", "integer", threads_default,
              allowedText("threads", rangeText(std::int64_t{0}, std::int64_t{kMaxThreads}), ""), threads,
              [compute](YamlReader& r, S& x) { readThreads(r, x.*compute); });
  return s;
}

}  // namespace

const SectionSchema<RolloutSection>& rolloutSchema() {
  using R = RolloutSection;
  static const auto schema = [] {
    SectionSchema<R> s =
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
                     "the engine's KV block pool; 0: enough for `max_running` full contexts, within a quarter of the "
                     "host's memory on the CPU (never less than one full context) or `kv_cache_fraction` of the "
                     "device's free memory on CUDA. Too small is a config error naming the least size",
                     "0 or at least one full context")
            .number("kv_cache_fraction", &R::kv_cache_fraction, 0.01, 0.95, "fraction",
                    "a CUDA engine with `kv_cache_bytes: 0`: its pool takes up to this share of what the device has "
                    "free once the engine's weights are placed (the driver's free bytes and LibTorch's cached ones); "
                    "fewer bytes than one full context is an error at start naming this key. The CPU ignores it")
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
            .integer("environment_threads", &R::environment_threads, -1, 256,
                     "threads (-1: auto, 0: the rank's thread)",
                     "threads that run the environment's work (resets, answers to turns: server round trips, tool "
                     "calls, reward programs) while the engine steps the other episodes, on the per-episode path; "
                     "`-1`: 8 where the environment waits on other processes or servers (`openenv`, "
                     "`code_interpreter`, MCP tools, `command`/`http`/`code` rewards), else 0 (the rank's thread) "
                     "(docs/rollout-backends.md)")
            // Its default follows run.mode: parseConfig sets it before this section is read.
            .custom("on_new_version", "string", "`continue` (async), `finish` (sync)", namesText(kOnNewVersionNames),
                    "the engine backend: what running sequences do when the rank pulls a new version. `continue`: "
                    "they go on under the new weights from the next step, their K/V recomputed, each token recording "
                    "its version; `abort`: the same on the engine; `finish`: the pull waits until they end "
                    "(docs/rollout-backends.md, \"Generation across versions\"). The http backend's is `update_mode`",
                    [](YamlReader& r, R& rollout) {
                      rollout.on_new_version = r.getEnum("on_new_version", rollout.on_new_version, kOnNewVersionNames);
                    });
    return computeKeys(
        s, &R::compute,
        "where each rollout rank's engine (weights, KV cache, sampling) runs; plain `cuda`: the GPU of "
        "the rank's node-local slot modulo the visible GPUs (docs/gpu.md). Refused by `astraflow "
        "validate` and at start on a machine without a GPU",
        "the engine's weight and KV-cache dtype; `auto`: bf16 on CUDA; on the CPU bf16 for a model of "
        "100 M parameters or more when the CPU has bf16 instructions (AVX-512 BF16 or AMX: 2.6–2.8× "
        "fp32's tokens/s at the Qwen3-0.6B shape, docs/performance.md), else fp32 (small models run "
        "faster in fp32). A bf16 CPU engine computes from its node's shared copy of the weights in place "
        "(docs/weights.md). The weights it receives are bf16 either way",
        "LibTorch/OpenBLAS threads of each rollout rank; `0`: `run.threads_per_rank`'s rule");
  }();
  return schema;
}

// policies[i].model given by its sizes (a Hugging Face folder, `hf`, is read by parseHfModel).
const SectionSchema<ModelConfig>& modelSchema() {
  using M = ModelConfig;
  static const auto schema =
      SectionSchema<M>("policies[i].model")
          .integer("d_model", &M::d_model, 8, 65536, "units", "hidden size")
          .integer("layers", &M::layers, 1, 512, "blocks", "decoder blocks")
          .integer("heads", &M::heads, 1, 1024, "heads", "query heads")
          .integer("kv_heads", &M::kv_heads, 1, 1024, "heads", "key/value heads (grouped-query attention)")
          .integer("head_dim", &M::head_dim, 0, 4096, "units", "per-head size; 0 = `d_model / heads`")
          .integer("ffn_hidden", &M::ffn_hidden, 1, 1 << 20, "units", "SwiGLU inner size")
          .integer("max_seq_len", &M::max_seq_len, 8, 1 << 20, "tokens",
                   "longest context (prompt + turns + environment replies)")
          .boolean("tied_embeddings", &M::tied_embeddings, "output head shares the embedding matrix")
          .number("rope_theta", &M::rope_theta, 1.0, 1e9, "", "rotary base")
          .number("rms_eps", &M::rms_eps, 1e-12, 1e-2, "", "RMSNorm epsilon")
          .choice("attention", &M::attention, kAttentionKindNames,
                  "attention through `at::scaled_dot_product_attention` (LibTorch picks the kernel for the device), "
                  "or the explicit matmul–softmax–matmul it replaced (the reference the tests compare with; same "
                  "logits to float tolerance)")
          .rule("grouped_heads", "`kv_heads` divides `heads`",
                [](YamlReader& r, const M& m) {
                  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
                    r.fail("kv_heads", fmt::format("given {}; allowed: a divisor of heads ({})", m.kv_heads, m.heads));
                })
          .rule("head_size", "`heads` divides `d_model` unless `head_dim` is set",
                [](YamlReader& r, const M& m) {
                  if (m.head_dim == 0 && m.d_model % m.heads != 0)
                    r.fail("heads", fmt::format("given {}; allowed: a divisor of d_model ({}) unless head_dim is set",
                                                m.heads, m.d_model));
                })
          .rule("rotary_pairs", "the head size is even (rotary embeddings pair dimensions)",
                [](YamlReader& r, const M& m) {
                  if (m.headDim() % 2 != 0)
                    r.fail("head_dim", fmt::format("head size {} is odd; allowed: an even size (rotary embeddings "
                                                   "pair dimensions)",
                                                   m.headDim()));
                });
  return schema;
}

namespace {

// policies[i].model: {hf: FOLDER}: the folder's config.json gives every size; beside it only the
// run-time choices (context limit, attention kernel) may be set.
void parseHfModel(YamlReader& r, ModelConfig& m) {
  const std::string folder = r.requireString("hf");
  // The sizes come from config.json: every key of a model given by its sizes but these two.
  for (const auto& doc : modelSchema().doc().keys) {
    const std::string key = doc.key.substr(doc.key.rfind('.') + 1);
    if (key == "max_seq_len" || key == "attention") continue;
    if (r.has(key))
      r.fail(key, fmt::format("is set by {}/config.json; remove it (allowed beside hf: max_seq_len, "
                              "attention)",
                              folder));
  }
  try {
    m = readHfModelConfig(folder).model;
  } catch (const ConfigError& e) {
    r.fail("hf", e.what());
  }
  m.max_seq_len = static_cast<int>(r.getInt("max_seq_len", m.max_seq_len, 8, m.max_position_embeddings, "tokens"));
  m.attention = r.getEnum("attention", AttentionKind::Sdpa, kAttentionKindNames);
  r.finish();
}

void parseModel(YamlReader r, ModelConfig& m) {
  if (r.has("hf")) {
    parseHfModel(r, m);
    return;
  }
  modelSchema().read(r, m);
}

}  // namespace

const SectionSchema<PolicySection>& policySchema() {
  using P = PolicySection;
  static const auto schema =
      SectionSchema<P>("policies[i]")
          .custom("name", "string", "required", "`[A-Za-z0-9_-]{1,64}`, unique", "policy id",
                  [](YamlReader& r, P& p) { p.name = r.requireString("name"); })
          .custom("model", "mapping", "the sizes' defaults (below)", "`{hf: FOLDER}` or the sizes below",
                  "`{hf: FOLDER}`: a Hugging Face model folder (`config.json` + `model.safetensors` or shards with "
                  "`model.safetensors.index.json`): the sizes, family (`Qwen3ForCausalLM`, `Qwen2ForCausalLM`, "
                  "`LlamaForCausalLM`) and rotary settings come from `config.json` and the weights from the "
                  "safetensors files (docs/models.md). Beside `hf` only `max_seq_len` (at most "
                  "`max_position_embeddings`; default that) and `attention` may be set; a size key is refused. "
                  "Unsupported architectures, rope types (allowed: default, linear, llama3), sliding windows, "
                  "activations, quantisation are refused naming the `config.json` field. Otherwise a model given "
                  "by its sizes (below)",
                  [](YamlReader& r, P& p) { parseModel(r.child("model"), p.model); })
          .number("sft_target_accuracy", &P::sft_target_accuracy, 0.0, 1.0, "fraction",
                  "`astraflow sft` of a multi-agent workflow stops this policy's warm start here (its role's "
                  "held-out accuracy)")
          .defaultShown("that of `sft.target_accuracy`")
          .rule("policy_name", "`name` is 1-64 characters of `[A-Za-z0-9_-]` (it names files and weights)",
                [](YamlReader& r, const P& p) { requireIdentifier(r, "name", p.name); });
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

namespace {

using T = TrainerSection;

// AdamW and its learning-rate schedule.
void optimiserKeys(SectionSchema<T>& s) {
  s.number("lr", &T::lr, 0.0, 10.0, "", "AdamW learning rate (the peak, with a schedule)")
      .choice("lr_schedule", &T::lr_schedule, kLrScheduleNames,
              "the rate by optimiser step: a linear warm-up over `warmup_steps`, then constant, or "
              "linear/cosine decay to `lr_floor × lr` at `decay_steps` (docs/training.md). The step is AdamW's "
              "own count, kept in checkpoints: a resumed run continues the schedule")
      .integer("warmup_steps", &T::warmup_steps, 0, 1 << 30, "steps", "linear warm-up from `lr / warmup_steps` to `lr`")
      .number("lr_floor", &T::lr_floor, 0.0, 1.0, "fraction of `lr`", "where the decay ends")
      .integer("decay_steps", &T::decay_steps, 0, 1 << 30, "steps",
               "the schedule's length; 0: `run.versions × ppo_epochs × mini_batches` (`train-local`: "
               "`local.steps × ppo_epochs × mini_batches`)")
      .number("beta1", &T::beta1, 0.0, 0.999999, "", "AdamW's first-moment decay")
      .number("beta2", &T::beta2, 0.0, 0.999999, "", "AdamW's second-moment decay")
      .number("weight_decay", &T::weight_decay, 0.0, 10.0, "", "AdamW decoupled weight decay")
      .number("grad_clip", &T::grad_clip, 0.0, 1e6, "global L2 norm", "gradient clipping", "0 = off");
}

// How a step's batch is cut and laid out: mini-batches, micro-batches, packing, shared prefixes.
void batchKeys(SectionSchema<T>& s) {
  s.integer("groups_per_step", &T::groups_per_step, 1, 1 << 20, "groups",
            "prompts per RL step (× `group_size` samples)")
      .integer("ppo_epochs", &T::ppo_epochs, 1, 64, "passes",
               "passes over each RL batch (the clip bounds the later steps)")
      .integer("mini_batches", &T::mini_batches, 1, 1024, "optimiser steps",
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
               "every token at once");
}

// Where and how it computes, a simulated trainer, and how a data-parallel group shares the work.
void trainerComputeKeys(SectionSchema<T>& s) {
  computeKeys(s, &T::compute,
              "where each trainer rank's model, optimiser and loss live (as `rollout.device`); `train-local` "
              "and `sft` run their one model here too",
              "compute dtype: `bf16` runs forward and backward under autocast to bf16; master weights and "
              "AdamW state stay fp32. `auto`: bf16 on CUDA, fp32 on the CPU",
              "LibTorch/OpenBLAS threads of each trainer rank; `0`: `run.threads_per_rank`'s rule. A trainer "
              "that works while its node's rollout ranks mostly wait (the text demo) gains from more than an "
              "even share of the cores");
  s.custom("simulate", "mapping", "absent", "`{fixed_seconds, seconds_per_token, weight_bytes, changed_fraction}`",
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
              "norm and output head stay whole on every rank with their AdamW state sharded; a KL penalty's "
              "frozen reference (`loss.kl_coef > 0`) is sharded the same way. Checkpoints keep the "
              "unsharded format (rank 0 gathers weights and state), so a run resumes with any group size and "
              "any sharding (docs/training.md). No effect with one trainer rank");
}

}  // namespace

const SectionSchema<TrainerSection>& trainerSchema() {
  static const auto schema = [] {
    SectionSchema<T> s("trainer");
    optimiserKeys(s);
    batchKeys(s);
    trainerComputeKeys(s);
    s.nested("loss", &T::loss, lossSchema());
    return s;
  }();
  return schema;
}

}  // namespace astraflow::detail
