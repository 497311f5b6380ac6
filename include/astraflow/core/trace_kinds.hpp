#pragma once
// Every kind of trace event, named once: the roles record a TraceKind, the trace file stores its
// name (io/trace_writer.hpp; the names are the file format, so they never change), and the
// readers (io/trace_report.cpp, apps/balance_replay.cpp) map a stored name back with
// traceKindOf. A kind the table lacks (a newer writer's) is skipped by the readers. What each
// kind puts in version, bytes, count, policy, total and staleness: docs/runtime-notes.md,
// "Trace events"; profiling/plot_run.py checks its names against the file's `kinds` attribute,
// which the writer fills from this table.
#include <array>
#include <optional>
#include <string_view>

#include "astraflow/core/enum_names.hpp"

namespace astraflow {

enum class TraceKind {
  // trainer
  BatchWait,    // waiting for a batch
  TrainStep,    // version = new version, count = trajectories, bytes = tokens
  Memory,       // bytes = peak resident set, count = the CUDA allocator's peak
  WeightStage,  // a version staged into the store
  Checkpoint,   // trainer and dataflow: a checkpoint written
  ExportHf,     // a Hugging Face folder of the policy written
  // rollout
  Startup,       // a rank's start-up (a spawned rank's spawn, on the run clock)
  WeightLoad,    // the engine moved to a version
  WeightPull,    // version reached, bytes read from the store, policy
  Generate,      // version used, count = trajectories, bytes = generated tokens
  EvalGenerate,  // as Generate, for evaluation tasks
  TaskWait,      // waiting for a task
  // dataflow
  Publish,         // bytes = the version's size, policy
  Delta,           // the version's logged delta: bytes, count = changed bf16 elements, policy
  ServeBatch,      // version = the trainer's, bytes, count = trajectories, policy
  BatchStaleness,  // staleness = s, count = trajectories of a served batch with it, policy
  Books,           // cumulative: count = entered of total = produced
  BooksUsed,       // cumulative: count = consumed of total = consumed + stale dropped
  Balance,         // count = G, the window's rollout ranks
  BalanceTarget,   // count = G_target
  Spawn,           // elastic pools: count = ranks
  Retire,
  PoolLost,
  Eval,         // count = summed rewards of total = problems × samples
  EvalPassAtK,  // count = problems with a full-reward sample of total = problems
  // a remote site's gateway
  SiteWeights,  // a mirrored version: bytes received, count = deltas (0: full)
};

inline constexpr std::array<EnumName<TraceKind>, 26> kTraceKindNames{{
    {"batch_wait", TraceKind::BatchWait},
    {"train_step", TraceKind::TrainStep},
    {"memory", TraceKind::Memory},
    {"weight_stage", TraceKind::WeightStage},
    {"checkpoint", TraceKind::Checkpoint},
    {"export_hf", TraceKind::ExportHf},
    {"startup", TraceKind::Startup},
    {"weight_load", TraceKind::WeightLoad},
    {"weight_pull", TraceKind::WeightPull},
    {"generate", TraceKind::Generate},
    {"eval_generate", TraceKind::EvalGenerate},
    {"task_wait", TraceKind::TaskWait},
    {"publish", TraceKind::Publish},
    {"delta", TraceKind::Delta},
    {"serve_batch", TraceKind::ServeBatch},
    {"batch_staleness", TraceKind::BatchStaleness},
    {"books", TraceKind::Books},
    {"books_used", TraceKind::BooksUsed},
    {"balance", TraceKind::Balance},
    {"balance_target", TraceKind::BalanceTarget},
    {"spawn", TraceKind::Spawn},
    {"retire", TraceKind::Retire},
    {"pool_lost", TraceKind::PoolLost},
    {"eval", TraceKind::Eval},
    {"eval_pass_at_k", TraceKind::EvalPassAtK},
    {"site_weights", TraceKind::SiteWeights},
}};

constexpr const char* traceKindName(TraceKind kind) { return enumName(kTraceKindNames, kind); }
constexpr std::optional<TraceKind> traceKindOf(std::string_view name) { return enumByName(kTraceKindNames, name); }

}  // namespace astraflow
