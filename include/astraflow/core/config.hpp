#pragma once
// Typed run configuration, parsed from YAML (docs/configuration.md lists every key).
// Parsing never touches MPI: `astraflow validate` and the first step of `astraflow run`
// use it before any rank talks to another.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "astraflow/core/enum_names.hpp"
#include "astraflow/core/environment_options.hpp"
#include "astraflow/core/model_config.hpp"

namespace astraflow {

enum class Role { Dataflow, Trainer, Rollout, Gateway };
inline constexpr std::array<EnumName<Role>, 4> kRoleNames{
    {{"dataflow", Role::Dataflow}, {"trainer", Role::Trainer}, {"rollout", Role::Rollout}, {"gateway", Role::Gateway}}};
const char* roleName(Role role);

// run.mode: the dataflow runtime with bounded staleness, or the colocated-synchronous baseline
// (one batch on one version, then one step; for comparisons).
enum class RunMode { Async, Sync };
inline constexpr std::array<EnumName<RunMode>, 2> kRunModeNames{{{"async", RunMode::Async}, {"sync", RunMode::Sync}}};

// elastic.mode: no spawned pools; spawn/retire by the balance report; or a maintainer command
// (or target file) decides.
enum class ElasticMode { Off, Auto, External };
inline constexpr std::array<EnumName<ElasticMode>, 3> kElasticModeNames{
    {{"off", ElasticMode::Off}, {"auto", ElasticMode::Auto}, {"external", ElasticMode::External}}};

// layout[i].backend.api of an http pool: SGLang's native /generate, OpenAI's /v1/completions,
// or vLLM's (its /v1/completions, weights through its development endpoints).
enum class HttpApi { Sglang, Openai, Vllm };
inline constexpr std::array<EnumName<HttpApi>, 3> kHttpApiNames{
    {{"sglang", HttpApi::Sglang}, {"openai", HttpApi::Openai}, {"vllm", HttpApi::Vllm}}};

// run.log_level (and --log-level): the least severe message a rank's log prints.
enum class LogLevel { Trace, Debug, Info, Warn, Error };
inline constexpr std::array<EnumName<LogLevel>, 5> kLogLevelNames{{{"trace", LogLevel::Trace},
                                                                   {"debug", LogLevel::Debug},
                                                                   {"info", LogLevel::Info},
                                                                   {"warn", LogLevel::Warn},
                                                                   {"error", LogLevel::Error}}};

struct RunSection {
  std::string name = "astraflow";
  std::string output_dir = "runs/astraflow";  // the run folder: checkpoints, traces, summary
  std::uint64_t seed = 1;
  LogLevel log_level = LogLevel::Info;
  int threads_per_rank = 0;  // LibTorch/OpenBLAS threads; 0 = cores on node / ranks on node
  // The distributed run (`astraflow run`).
  RunMode mode = RunMode::Async;
  int versions = 100;           // stop once every policy's trainer has published this version
  double max_wall_seconds = 0;  // also stop after this long (0 = no limit); the run still ends cleanly
  int checkpoint_every = 0;     // versions between checkpoints (0 = only the final one)
  // Keep the trainer checkpoint of the evaluation round with the best mean accuracy as
  // checkpoints/best.<policy>.h5 (with checkpoints/best.json saying which version it is).
  bool keep_best = false;
  // The newest complete checkpoints kept (older ones removed as new ones complete; the best one
  // under keep_best stays); 0 = every one.
  int keep_checkpoints = 0;
  // Trace events and trajectories reach their files at least this often (and every 256 records),
  // so a run that is killed leaves what it did up to then (0: by count only).
  double flush_seconds = 10;
  // The memory plan at the start (docs/memory.md): refuse a run whose plan exceeds a node's
  // memory, only warn, or skip the check.
  enum class MemoryCheck { Refuse, Warn, Off } memory_check = MemoryCheck::Refuse;
  int export_hf_every = 0;      // versions between Hugging Face folders of the trained policies (0 = none)
  int progress_every = 5;       // versions between progress lines
  std::string init_checkpoint;  // warm start for every policy; empty = <output_dir>/sft.h5 if it exists
};
inline constexpr std::array<EnumName<RunSection::MemoryCheck>, 3> kMemoryCheckNames{
    {{"refuse", RunSection::MemoryCheck::Refuse},
     {"warn", RunSection::MemoryCheck::Warn},
     {"off", RunSection::MemoryCheck::Off}}};

struct PolicySection {
  std::string name;
  ModelConfig model;
  double sft_target_accuracy = -1;  // `astraflow sft` stops this policy here; < 0: sft.target_accuracy
  int line = 0;
};

// What a rollout rank on the engine backend does with running sequences when it pulls a new
// version (rollout.on_new_version; docs/rollout-backends.md, "Generation across versions").
enum class OnNewVersion {
  Finish,    // they end under the version they began with; the pull waits for them
  Continue,  // they move to the new weights at the next step, their K/V recomputed
  Abort,     // the engine stops them at the version and resumes them from their tokens: as Continue
};
inline constexpr std::array<EnumName<OnNewVersion>, 3> kOnNewVersionNames{
    {{"finish", OnNewVersion::Finish}, {"continue", OnNewVersion::Continue}, {"abort", OnNewVersion::Abort}}};

// How RaaS samples (rollout section).
struct RolloutSection {
  int group_size = 8;  // samples per prompt (GRPO group)
  double temperature = 1.0;
  double top_p = 1.0;
  int max_new_tokens = 8;            // per agent turn
  double max_new_tokens_growth = 0;  // tokens the cap grows by per weight version (a growing workload; 0: fixed)
  double min_new_tokens_growth = 0;  // tokens the minimum (no stop before it) grows by per weight version
  int batch_tasks = 64;              // most tasks a RaaS rank takes from its ring for one generate call
  // The continuous engine (rollout/sequence_scheduler.hpp, docs/rollout-backends.md).
  int max_running = 64;                    // sequences stepped together
  std::int64_t kv_cache_bytes = 0;         // its KV block pool; 0: sized automatically
  double kv_cache_fraction = 0.8;          // a CUDA engine's automatic pool: this share of the device's free memory
  int kv_block_size = 16;                  // token positions per KV block
  std::int64_t max_prefill_tokens = 4096;  // padded positions one prefill forward may take
  bool prepacked_weights = false;          // a CPU engine in fp32 computes from weights packed once (policy_model.hpp)
  // Threads that run the environment's work (resets, answers to turns) beside the engine
  // (rollout/episode_stream.hpp); -1 (auto): 8 where that work waits on other processes or servers
  // (openenv, MCP tools, code_interpreter, command/http/code rewards), else 0 (the rank's thread).
  int environment_threads = -1;
  OnNewVersion on_new_version = OnNewVersion::Continue;  // default: continue in async mode, finish in sync
  ComputeOptions compute;  // rollout.device, rollout.precision (the engine's weights and KV cache)
};

// trainer.loss.kind: PPO's clipped ratio against the behaviour log-probs, or the decoupled
// objective (a proximal policy between them).
enum class LossKind { Ppo, Decoupled };
inline constexpr std::array<EnumName<LossKind>, 2> kLossKindNames{
    {{"ppo", LossKind::Ppo}, {"decoupled", LossKind::Decoupled}}};

struct LossSection {
  LossKind kind = LossKind::Ppo;
  double clip_low = 0.2;
  double clip_high = 0.28;
  double kl_coef = 0.0;
  enum class Kl { K1, K3 } kl_estimator = Kl::K3;  // the per-token KL estimator
  bool m2po = false;
  double m2_threshold = 0.04;
  // The normalisation of GRPO advantages: by the group's std, or by the batch's.
  enum class Advantage { Group, Batch } advantage = Advantage::Group;
  bool scale_by_std = true;
};
inline constexpr std::array<EnumName<LossSection::Kl>, 2> kKlEstimatorNames{
    {{"k1", LossSection::Kl::K1}, {"k3", LossSection::Kl::K3}}};
inline constexpr std::array<EnumName<LossSection::Advantage>, 2> kAdvantageNames{
    {{"group", LossSection::Advantage::Group}, {"batch", LossSection::Advantage::Batch}}};

struct TrainerSection {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double weight_decay = 0.0;
  double grad_clip = 1.0;    // max global gradient norm; 0 = off
  int groups_per_step = 16;  // prompts (groups) per RL step
  int ppo_epochs = 1;        // passes over each RL batch
  int mini_batches = 1;      // optimiser steps per pass, each on a shuffled slice of the batch
  // Gradient accumulation (docs/training.md): an optimiser step's sequences go through the model
  // in micro-batches of at most this many tokens (lines × longest; 0: all at once).
  std::int64_t micro_batch_tokens = 0;
  bool packing = false;                   // several sequences per line, attention kept within each
  bool shared_prefix = true;              // a group's rows go through the forward after one copy of their prompt
  bool activation_checkpointing = false;  // recompute each block's activations in the backward
  // Log-probs are computed from the hidden states with float32 logits about this many bytes at a
  // time (model/chunked_logprobs.hpp; 0: every token's logits at once).
  std::int64_t logits_chunk_bytes = std::int64_t{64} << 20;
  // The learning rate by optimiser step (trainer/lr_schedule.hpp): a linear warm-up over
  // warmup_steps, then constant, or linear/cosine decay to lr_floor × lr at decay_steps
  // (0: the run's length, run.versions × ppo_epochs × mini_batches; train-local: local.steps
  // × ppo_epochs × mini_batches).
  enum class LrSchedule { Constant, Linear, Cosine } lr_schedule = LrSchedule::Constant;
  int warmup_steps = 0;
  double lr_floor = 0.0;
  int decay_steps = 0;
  LossSection loss;
  ComputeOptions compute;  // trainer.device, trainer.precision (autocast compute; master weights stay fp32)
  // trainer.grad_sync: how a data-parallel group averages gradients. c10d: a Gloo (CPU) or
  // NCCL (CUDA) process group; mpi: reduce to rank 0 + broadcast over the group's communicator;
  // auto: NCCL on CUDA, MPI on the CPU (faster than Gloo there: docs/performance.md).
  enum class GradSync { Auto, C10d, Mpi } grad_sync = GradSync::Auto;
  // trainer.sharding (docs/training.md): none keeps a full AdamW state on every data-parallel
  // rank; optimizer is ZeRO-1 — each rank keeps the state of one shard of the flattened
  // parameters (gradients reduce-scattered, parameters all-gathered over grad_sync's transport);
  // parameters also shards the transformer blocks' weights and gradients (FSDP-style: a block
  // is gathered for its forward and its backward, then freed).
  enum class Sharding { None, Optimizer, Parameters } sharding = Sharding::None;
  // trainer.simulate (docs/simulation.md): the trainer consumes real batches but sleeps the
  // modelled step time (fixed_seconds + seconds_per_token × the batch's tokens) instead of a
  // backward pass, and publishes synthetic weight versions of weight_bytes (0: the model's
  // packed size), changed_fraction of their bf16 words changed per version. Every rollout pool
  // must then be simulated (its versions are not a model's weights).
  struct Simulation {
    bool enabled = false;
    double fixed_seconds = 0;
    double seconds_per_token = 0;
    std::int64_t weight_bytes = 0;
    double changed_fraction = 0.05;
  } simulate;
};
inline constexpr std::array<EnumName<TrainerSection::LrSchedule>, 3> kLrScheduleNames{
    {{"constant", TrainerSection::LrSchedule::Constant},
     {"linear", TrainerSection::LrSchedule::Linear},
     {"cosine", TrainerSection::LrSchedule::Cosine}}};
inline constexpr std::array<EnumName<TrainerSection::GradSync>, 3> kGradSyncNames{
    {{"auto", TrainerSection::GradSync::Auto},
     {"c10d", TrainerSection::GradSync::C10d},
     {"mpi", TrainerSection::GradSync::Mpi}}};
inline constexpr std::array<EnumName<TrainerSection::Sharding>, 3> kShardingNames{
    {{"none", TrainerSection::Sharding::None},
     {"optimizer", TrainerSection::Sharding::Optimizer},
     {"parameters", TrainerSection::Sharding::Parameters}}};

// Supervised warm start on the environment's reference solutions (`astraflow sft`).
struct SftSection {
  int max_steps = 2000;
  int batch_size = 64;
  double lr = 3e-3;
  double target_accuracy = 0.5;  // stop once held-out greedy accuracy reaches this
  int eval_every = 50;           // steps
  std::string checkpoint;        // output; default <output_dir>/sft.h5
};

struct EvalSection {
  int problems = 200;        // held-out problems per evaluation
  int every = 10;            // optimiser steps between evaluations
  int samples = 1;           // k: answers per problem (pass@1 is their mean reward, pass@k any full reward)
  double temperature = 0.0;  // 0: greedy; > 0 (needed for samples > 1): sampled at this temperature
  // Named sets evaluated beside the environment's own held-out problems (dataset environments).
  std::vector<EvalSetSpec> sets;
  // Whether `astraflow run` evaluates at all: the environment's held-out problems or named sets.
  bool enabled() const { return problems > 0 || !sets.empty(); }
};

// weights.mode: every version sent whole, or sparse bf16 deltas between consecutive versions.
enum class WeightsMode { Full, Delta };
inline constexpr std::array<EnumName<WeightsMode>, 2> kWeightsModeNames{
    {{"full", WeightsMode::Full}, {"delta", WeightsMode::Delta}}};
// weights.compression: on top of the delta encoding.
enum class WeightsCompression { None, Zstd };
inline constexpr std::array<EnumName<WeightsCompression>, 2> kWeightsCompressionNames{
    {{"none", WeightsCompression::None}, {"zstd", WeightsCompression::Zstd}}};

// Weight transfer from trainers to rollout ranks (docs/architecture.md §8, docs/weights.md).
struct WeightsSection {
  WeightsMode mode = WeightsMode::Delta;
  int full_sync_every = 16;  // a reader applies at most this many deltas in a row, then pulls a full version
  int delta_log = 8;         // deltas the store keeps per policy (a reader further behind pulls a full version)
  WeightsCompression compression = WeightsCompression::None;
  int encode_threads = 0;  // threads of the store host's delta encode; 0: the cores this process may run on, ≤ 8
  int pull_every = 1;      // a rollout rank pulls once the store is this many versions ahead of it
  int relay_fanout = 0;    // nodes each node relays full versions to (a tree); 0: every node pulls from the store
};

// The balance report and the three-zone policy (docs/elastic.md, paper §4.2.1).
struct ElasticSection {
  int every = 10;          // K: a balance report every K trainer versions (0: none)
  double tau_low = 0.05;   // w below: scale down
  double tau_high = 0.10;  // w above: scale up
  double rho = 1.10;       // shrink margin
  int g_min = 1;           // rollout ranks, bounds of G_target
  int g_max = 64;
  ElasticMode mode = ElasticMode::Off;
  std::string command;  // external: run with the report's JSON path; its last stdout line is G_target
  double command_timeout_s = 30;
  std::string target_file;    // external: a file holding G_target, read at each report (default <run>/balance/target)
  double lease_seconds = 60;  // a spawned pool silent this long while holding tasks is lost; its tasks are re-issued
  int spawn_max = 8;          // ranks one spawn adds at most
};

// Cross-site rollout (docs/cross-site.md). A home job's dataflow rank listens for gateways; a
// remote job's layout holds a gateway rank (in place of the dataflow rank, without trainers)
// that connects home over UCX, mirrors the weights for its local rollout pool and forwards
// their trajectories.
struct CrossSiteSection {
  std::string listen;                              // home: "host:port" to accept gateways on ("": none)
  std::string connect;                             // gateway: "host:port" of the home dataflow rank
  std::string site = "remote";                     // gateway: this site's name (logs, home summary)
  std::string token;                               // shared secret (token_env is preferred)
  std::string token_env = "ASTRAFLOW_SITE_TOKEN";  // environment variable holding the secret
  int wait_for_sites = 0;                          // home: gateways to wait for before admitting tasks
  double wait_seconds = 120;                       // home: how long to wait; gateway: how long to try to connect
  int tasks_in_flight = 256;                       // gateway: tasks it holds from home at most
  // home: a site's outbox (frames posted, not yet taken by its link) past this many bytes gets
  // no tasks and waits for weight updates (0: two full versions of the largest policy + 1 MiB)
  std::uint64_t outbox_bytes = 0;
  // home: a site whose oldest queued frame waits this long, or that owes home trajectories or its
  // end and says nothing this long, is lost (longer than one full version takes on the link)
  double stall_seconds = 300;
};

// The single-process reference loop (`astraflow train-local`).
struct LocalSection {
  int steps = 200;
  double max_wall_seconds = 300;
  std::string init_checkpoint;  // default <output_dir>/sft.h5 when it exists
};

// How a rollout pool generates (layout[i].backend; docs/rollout-backends.md). `engine`: the
// in-process LibTorch engine. `http`: an external inference server per rank (SGLang's /generate
// or an OpenAI-style /v1/completions), fed weight versions as Hugging Face folders.
// A simulated pool's workload and accelerator (backend kind simulated; docs/simulation.md): no
// model; each generation's length is drawn, the rank sleeps the modelled time, and the
// trajectory carries synthetic tokens and a reward drawn from the success rate.
struct SimulatedBackendSpec {
  // Generated tokens per episode: fixed (mean), geometric (mean), lognormal (median, sigma) or
  // empirical (the generated-token counts of a run's trajectories.h5), clamped to [min, max].
  enum class Lengths { Fixed, Geometric, Lognormal, Empirical };
  Lengths lengths = Lengths::Lognormal;
  double mean = 256;
  double median = 256, sigma = 1.0;
  std::string trajectories;  // empirical: the file
  std::vector<int> samples;  // empirical: its lengths (read by the run layer, not the parser)
  int min_tokens = 1, max_tokens = 4096;
  double growth_per_version = 0;  // drawn lengths × (1 + growth × version): a workload that lengthens
  // The accelerator: prompt tokens/s, one sequence's decode tokens/s, and its batching — up to
  // batch_limit sequences decode together, each step slower by batch_slowdown per extra one.
  // Continuous (SGLang, vLLM): a sequence that ends frees its slot for the next. Static (astraflow's
  // own engine): the rows of a batch step together until the longest of them ends.
  enum class Batching { Continuous, Static };
  Batching batching = Batching::Continuous;
  double prefill_tokens_per_second = 20000;
  double decode_tokens_per_second = 50;
  int batch_limit = 256;
  double batch_slowdown = 0.004;
  // P(reward 1) = min(success_max, success_rate + success_gain_per_version × version).
  double success_rate = 0.3, success_gain_per_version = 0, success_max = 1.0;
};

inline constexpr std::array<EnumName<SimulatedBackendSpec::Lengths>, 4> kSimulatedLengthsNames{
    {{"fixed", SimulatedBackendSpec::Lengths::Fixed},
     {"geometric", SimulatedBackendSpec::Lengths::Geometric},
     {"lognormal", SimulatedBackendSpec::Lengths::Lognormal},
     {"empirical", SimulatedBackendSpec::Lengths::Empirical}}};
inline constexpr std::array<EnumName<SimulatedBackendSpec::Batching>, 2> kBatchingNames{
    {{"continuous", SimulatedBackendSpec::Batching::Continuous}, {"static", SimulatedBackendSpec::Batching::Static}}};

// layout[i].backend.kind: the in-process engine, an inference server over http, or the
// simulated accelerator (docs/simulation.md).
// layout[i].backend.update_mode: what an http server's requests in flight do at a new version.
enum class HttpUpdateMode { Finish, Abort };
inline constexpr std::array<EnumName<HttpUpdateMode>, 2> kHttpUpdateModeNames{
    {{"finish", HttpUpdateMode::Finish}, {"abort", HttpUpdateMode::Abort}}};

// layout[i].backend.launch.per: one launched server per rollout rank, or one per node shared by
// the node's ranks of the pool.
enum class LaunchScope { Rank, Node };
inline constexpr std::array<EnumName<LaunchScope>, 2> kLaunchScopeNames{
    {{"rank", LaunchScope::Rank}, {"node", LaunchScope::Node}}};

// layout[i].backend.launch: inference servers the pool starts itself, one per served policy and
// rank (or node), from the policy's first version; health-checked, started again when one dies,
// stopped with the run (docs/rollout-backends.md, "Servers the pool starts").
struct ServerLaunchSpec {
  // The program and its arguments; "{port}", "{model}" (the version folder it starts from) and
  // "{local_rank}" are replaced. api vllm and sglang add the flags their backend needs.
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;  // added to the host's environment ("{local_rank}" replaced)
  LaunchScope per = LaunchScope::Rank;
  double start_seconds = 900;  // a started server's /health must answer within it
  int max_restarts = 5;        // starts again after deaths before a server is given up
  std::string log_dir;         // its stdout and stderr (default <output_dir>/servers)
  bool enabled() const { return !command.empty(); }
};

enum class BackendKind { Engine, Http, Simulated };
inline constexpr std::array<EnumName<BackendKind>, 3> kBackendKindNames{
    {{"engine", BackendKind::Engine}, {"http", BackendKind::Http}, {"simulated", BackendKind::Simulated}}};

struct RolloutBackendSpec {
  BackendKind kind = BackendKind::Engine;
  HttpApi api = HttpApi::Sglang;  // http: the server's API
  std::vector<std::string> urls;  // http: rank i of the pool drives urls[i % size] ("http://host:port")
  // http: a policy's own servers (rank i: [i % size]); a served policy without an entry uses `urls`.
  std::map<std::string, std::vector<std::string>> policy_urls;
  std::string model;             // openai: the model id requests name (empty: the first of /v1/models)
  int max_in_flight = 32;        // requests one rank keeps in flight
  double timeout_seconds = 120;  // one request's limit
  int retries = 3;               // a failed request is sent again this many times
  double backoff_seconds = 0.5;  // wait before the first retry, doubling
  std::string weights_dir;       // shared folder the versions are written to (default <output_dir>/served_weights)
  std::string update_path = "/update_weights_from_disk";  // sglang, openai: the server's load-from-disk endpoint
  int update_failures = 3;         // weight updates in a row a server may refuse before the run stops with an error
  double logprob_tolerance = 0.1;  // start-up probe: mean |server - model| log-prob allowed (0: no probe)
  // finish: requests in flight finish on the old version (tagged with it); abort: the server is
  // paused with mode abort around the update (SGLang's /pause_generation, /continue_generation)
  // and each aborted request resumes from the tokens it made (prompt + those tokens), the rest
  // on the new version.
  HttpUpdateMode update_mode = HttpUpdateMode::Finish;
  int keep_versions = 2;           // version folders kept per policy
  double lost_after_seconds = 60;  // a server silent this long: its rank leaves the pool (tasks go back)
  ServerLaunchSpec launch;         // http: servers the pool starts (instead of url/urls/policy_urls)
  SimulatedBackendSpec simulated;  // simulated: the workload and the accelerator's cost model
  bool http() const { return kind == BackendKind::Http; }
  bool isSimulated() const { return kind == BackendKind::Simulated; }
  // The servers of `policy`'s requests and weight updates.
  const std::vector<std::string>& urlsFor(const std::string& policy) const {
    const auto it = policy_urls.find(policy);
    return it == policy_urls.end() ? urls : it->second;
  }
};

// One entry of `layout`: consecutive world ranks given one role.
struct LayoutEntry {
  Role role = Role::Rollout;
  int ranks = 1;
  std::string policy;                 // trainer: the policy it trains
  std::vector<std::string> policies;  // rollout: the policies the pool serves
  std::string pool;                   // rollout: pool name (default pool<i>)
  RolloutBackendSpec backend;         // rollout: how the pool generates
  int line = 0;
};

// Geometry of one RMA ring (docs/architecture.md §5): `slots` slots of `slot_bytes` payload each.
struct RingSection {
  std::uint64_t slots = 256;
  std::uint64_t slot_bytes = 1024;
};

// How one data-algorithm plug-in is asked for (include/astraflow/dataflow/plugins.hpp): `kind`
// plus its parameters (YAML scalars as text). `key` is its config path for messages.
struct PluginSpec {
  std::string kind;
  std::map<std::string, std::string> params;
  std::string key;

  // Typed parameter access; a missing parameter gives `fallback`. A value that does not parse
  // or lies outside [low, high] throws ConfigError naming `key.param`, the value and the range.
  double number(const std::string& param, double fallback, double low, double high) const;
  std::int64_t integer(const std::string& param, std::int64_t fallback, std::int64_t low, std::int64_t high) const;
  // Throws ConfigError for a parameter not in `known`.
  void allowOnly(const std::vector<std::string>& known) const;
};

struct DataflowSection {
  RingSection task_ring{256, 512};
  RingSection trajectory_ring{1024, 4096};
  RingSection batch_ring{8, 1u << 20};
  int max_staleness = 4;             // η, in weight versions
  std::uint64_t prompt_pool = 0;     // prompts recur: cycle over this many training problems (0 = endless new ones)
  std::vector<PluginSpec> curators;  // pre-rollout, in order
  std::vector<PluginSpec> filters{{"keep_all", {}, "dataflow.filters[0]"}};  // post-rollout, in order
  PluginSpec sampler{"fresh", {}, "dataflow.sampler"};
  PluginSpec router{"by_policy", {}, "dataflow.router"};
  bool router_given = false;  // the config named a router (else a multi-agent workflow defaults to by_role)
};

// workflow.kind (docs/multi-policy.md).
enum class WorkflowKind { Single, SolverVerifier, SolverSelector, SolverTestgen };
inline constexpr std::array<EnumName<WorkflowKind>, 4> kWorkflowKindNames{
    {{"single", WorkflowKind::Single},
     {"solver_verifier", WorkflowKind::SolverVerifier},
     {"solver_selector", WorkflowKind::SolverSelector},
     {"solver_testgen", WorkflowKind::SolverTestgen}}};
// A team's roles: what each does in an episode.
enum class TeamRole { Solver, Verifier, Selector, Generator };
inline constexpr std::array<EnumName<TeamRole>, 4> kTeamRoleNames{{{"solver", TeamRole::Solver},
                                                                   {"verifier", TeamRole::Verifier},
                                                                   {"selector", TeamRole::Selector},
                                                                   {"generator", TeamRole::Generator}}};
// workflow.rewards: a role's reward, the team's outcome, its own answer's, or its verdicts'.
enum class RoleReward { TeamCorrect, OwnCorrect, VerdictCorrect };
inline constexpr std::array<EnumName<RoleReward>, 3> kRoleRewardNames{
    {{"team_correct", RoleReward::TeamCorrect},
     {"own_correct", RoleReward::OwnCorrect},
     {"verdict_correct", RoleReward::VerdictCorrect}}};

// One role of a multi-agent workflow: the policy it runs on, its team-context template and
// its reward rule (docs/multi-policy.md).
struct WorkflowRole {
  TeamRole role = TeamRole::Solver;
  std::string name;     // the role's name (kTeamRoleNames): how tasks, reports and the router name it
  std::string policy;   // the policy whose weights generate this role's turns
  std::string context;  // template rendered before each of its turns (chat workflows: its user message):
                        // {problem} {solution} {feedback} {candidates} {candidate_a} {candidate_b}
                        // {task_description} {team_context}
  std::string system;   // chat workflows: the role's system message ("" for none)
  RoleReward reward = RoleReward::TeamCorrect;
};

// How an episode runs (section `workflow`). `single`: one policy per task, the environment's own
// single- or multi-turn episode. `solver_verifier` and `solver_selector`: several policies per
// episode, one trajectory per role, each routed to its own policy's trainer.
struct WorkflowSection {
  WorkflowKind kind = WorkflowKind::Single;
  std::vector<WorkflowRole> roles;  // in turn order (workflow.order)
  int max_rounds = 1;               // solver_verifier: solver attempts (reject → retry)
  int candidates = 1;               // solver_selector: 2 (the solver writes two candidates)
  // The chat workflows over a `dataset` environment (the code ones with the `code` reward,
  // solver_verifier with a text reward): each role's transcript is a chat conversation in the
  // policy's template, and `followup` is the solver's next user message (solver_testgen: the retry,
  // with {feedback}; solver_selector: the second candidate; solver_verifier: the retry, with the
  // verifier's analysis as {team_context}).
  bool chat = false;
  std::string followup;
  bool multiAgent() const { return kind != WorkflowKind::Single; }
  const char* kindName() const { return enumName(kWorkflowKindNames, kind); }
  const WorkflowRole* findRole(const std::string& name) const;
  // The roles' distinct policies, in role order.
  std::vector<std::string> policies() const;
};

struct Config {
  std::string source;  // file name the config came from (for messages)
  std::string text;    // the YAML it was parsed from, overrides applied (kept in checkpoints)
  RunSection run;
  std::vector<PolicySection> policies;
  std::vector<LayoutEntry> layout;
  DataflowSection dataflow;
  EnvironmentOptions environment;
  WorkflowSection workflow;
  RolloutSection rollout;
  TrainerSection trainer;
  SftSection sft;
  EvalSection eval;
  WeightsSection weights;
  CrossSiteSection cross_site;
  ElasticSection elastic;
  LocalSection local;

  int layoutRanks() const;     // world size the layout needs
  bool isGatewaySite() const;  // the layout has a gateway (a remote site's job)
  const PolicySection* findPolicy(const std::string& name) const;
};

// Throws ConfigError naming file, line, key path, the value given and what is allowed.
// `overrides` are "key.path=value" settings (the command line's --set) applied to the YAML
// before parsing, so an override is checked exactly like the same key in the file.
Config loadConfig(const std::string& path, const std::vector<std::string>& overrides = {});
Config parseConfig(const std::string& yaml_text, const std::string& source_name,
                   const std::vector<std::string>& overrides = {});

}  // namespace astraflow
