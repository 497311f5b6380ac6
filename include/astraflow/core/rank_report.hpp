#pragma once
// What one rank reports at the end of a run: a typed record per role, sent to the reporting rank
// in the wire code's byte format (encodeRankReport / decodeRankReport) and written into
// summary.json under "ranks" by the run module (src/run/rank_report_json.cpp), whose key names
// the tests and scripts read.
//
// Each struct lists its fields once, in `fields(self, visit)`: the encoder, the decoder and the
// JSON writer all walk that list, so a field added here is sent, read back and written without
// a second list to keep in step. Nested lists (per policy, per site) are vectors of structs with
// a `name`; `kJsonKey` says how the JSON writer names their fields ({name}, {field}).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace astraflow {

// What a field visitor tells apart besides scalars, bools and strings.
template <class T>
struct IsReportList : std::false_type {};
template <class T>
struct IsReportList<std::vector<T>> : std::true_type {};
template <class T>
struct IsReportOptional : std::false_type {};
template <class T>
struct IsReportOptional<std::optional<T>> : std::true_type {};

// One policy's weight pulls at a rollout rank.
struct PolicyPullFigures {
  static constexpr const char* kJsonKey = "{field}.{name}";
  std::string name;  // the policy
  std::int64_t final_version = -1;
  std::uint64_t weight_pulls = 0;
  std::uint64_t weight_full_pulls = 0;
  std::uint64_t weight_deltas_applied = 0;
  std::uint64_t weight_deltas_rejected = 0;
  std::uint64_t weight_bytes_pulled = 0;
  std::uint64_t weight_version_bytes = 0;
  std::uint64_t torn_retries = 0;
  std::uint64_t weights_hash = 0;  // XXH3 of the version's bytes: equal to its trainer's when in step
  // The node's shared copy (docs/weights.md): the rollout ranks sharing it, the versions this
  // rank pulled into it for them, and writes put off because another rank still used the spare.
  std::uint64_t node_ranks = 0;
  std::uint64_t node_versions_written = 0;
  std::uint64_t node_writes_put_off = 0;
  // Full versions and deltas this rank took for its node from an ancestor node instead of the
  // store, and the bytes of both (docs/weights.md, "Relayed between nodes").
  std::uint64_t node_versions_relayed = 0;
  std::uint64_t node_deltas_relayed = 0;
  std::uint64_t node_relay_bytes = 0;
  // Of those, the ones an ancestor past this node's parent served (the nearer ones were behind,
  // lost, or outwaited).
  std::uint64_t node_relay_further_up = 0;
  // Deltas this rank applied to its node's spare slot from the node's own kept deltas (the
  // other slot applied them), read from neither an ancestor nor the store.
  std::uint64_t node_deltas_kept = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("final_version", s.final_version), v("weight_pulls", s.weight_pulls);
    v("weight_full_pulls", s.weight_full_pulls), v("weight_deltas_applied", s.weight_deltas_applied);
    v("weight_deltas_rejected", s.weight_deltas_rejected), v("weight_bytes_pulled", s.weight_bytes_pulled);
    v("weight_version_bytes", s.weight_version_bytes), v("torn_retries", s.torn_retries);
    v("weights_hash", s.weights_hash), v("node_ranks", s.node_ranks);
    v("node_versions_written", s.node_versions_written), v("node_writes_put_off", s.node_writes_put_off);
    v("node_versions_relayed", s.node_versions_relayed), v("node_deltas_relayed", s.node_deltas_relayed);
    v("node_relay_bytes", s.node_relay_bytes), v("node_relay_further_up", s.node_relay_further_up);
    v("node_deltas_kept", s.node_deltas_kept);
  }
};

struct RolloutReport {
  std::uint64_t pushed = 0;  // training trajectories pushed
  std::uint64_t eval_pushed = 0;
  std::uint64_t oversize = 0;         // trajectories too large for a ring slot (dropped, counted)
  std::uint64_t context_cut = 0;      // transcripts longer than the policy's model.max_seq_len, cut to it
  std::uint64_t malformed_tasks = 0;  // task records that failed to decode
  std::uint64_t generated_tokens = 0;
  double generate_seconds = 0;
  double task_wait_seconds = 0;
  double weight_pull_seconds = 0;
  std::vector<PolicyPullFigures> policies;  // in the order the rank serves them; never empty
  // Why training episodes got their rewards, as the environment said (docs/tasks.md): the reward
  // functions' reasons; `reward_other` is any other reason, `reward_unstated` none (the synthetic
  // environments and truncated episodes).
  std::uint64_t reward_correct = 0, reward_wrong = 0, reward_no_answer = 0, reward_invalid = 0;
  std::uint64_t reward_timeout = 0, reward_crashed = 0, reward_memory_limit = 0, reward_other = 0;
  std::uint64_t reward_unstated = 0;
  std::uint64_t reward_env_error = 0;  // an environment server failed the episode (openenv)
  // An http generation backend's figures (docs/rollout-backends.md); 0 with the engine.
  // failed_episodes: episodes whose generation failed past the retries, sent as error records.
  std::uint64_t backend_requests = 0, backend_retries = 0, backend_failed = 0, backend_transport_errors = 0;
  std::uint64_t backend_http_errors = 0, backend_malformed = 0, failed_episodes = 0, tasks_returned = 0;
  std::uint64_t server_lost = 0;  // 1: the rank left early, its server silent past backend.lost_after_seconds
  std::uint64_t backend_weight_updates = 0, backend_weight_update_failures = 0, served_folders_written = 0;
  std::uint64_t backend_resumed = 0, backend_resumed_tokens = 0;  // aborted requests resumed from their tokens
  // Prompt positions the http backend sent, and those its servers said came from their prefix cache.
  std::uint64_t backend_prompt_tokens = 0, backend_cached_prompt_tokens = 0;
  // backend.launch: servers this rank started (or, per node, adopted), and started again after one died.
  std::uint64_t backend_server_starts = 0, backend_server_restarts = 0;
  double backend_request_seconds = 0, weight_write_seconds = 0, weight_load_seconds = 0;
  // The continuous engine's figures (rollout/sequence_scheduler.hpp), summed over the policies
  // it serves; 0 with another backend. Peak and pool: the largest of them.
  std::uint64_t engine_steps = 0, engine_prefill_tokens = 0, engine_shared_prompt_tokens = 0;
  std::uint64_t engine_decode_tokens = 0, engine_admission_waits = 0, engine_preemptions = 0;
  std::uint64_t engine_recomputed_tokens = 0, engine_peak_kv_bytes = 0, engine_kv_pool_bytes = 0;
  std::uint64_t engine_moved_sequences = 0;  // running sequences moved to a new version (on_new_version: continue)
  std::uint64_t engine_reused_context_tokens = 0;  // positions a next turn took from its previous turn's K/V
  std::uint64_t spanning_versions = 0;  // trajectories (evaluation included) whose tokens came from several versions
  // Verifiers that stay running (environment.reward persistent or http, tasks/reward_worker.hpp):
  // processes (connections) started, and started again after a crash, timeout or max_items.
  std::uint64_t verifier_started = 0, verifier_restarts = 0;
  // Tools of MCP servers (environment.tools.mcp, tasks/mcp_client.hpp): calls, those answered
  // "error: …", those past the timeout, servers started again, lines that were not JSON-RPC.
  std::uint64_t mcp_calls = 0, mcp_errors = 0, mcp_timeouts = 0, mcp_restarts = 0, mcp_malformed = 0;
  // OpenEnv servers (environment.name openenv, tasks/openenv.hpp): sessions opened, resets and
  // steps answered, those that failed (of them: timeouts, malformed replies), servers started again.
  std::uint64_t openenv_sessions = 0, openenv_steps = 0, openenv_errors = 0, openenv_timeouts = 0;
  std::uint64_t openenv_malformed = 0, openenv_restarts = 0;
  // The environment's work on threads beside the engine (rollout.environment_threads,
  // rollout/episode_stream.hpp): resets and turn answers run on them; the per-episode path's steps
  // of its sequence sources, and those taken while environment work was in flight.
  std::uint64_t environment_jobs = 0, stream_steps = 0, stream_steps_beside_environment = 0;

  void countRewardReason(std::string_view reason);

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("pushed", s.pushed), v("eval_pushed", s.eval_pushed), v("oversize", s.oversize);
    v("context_cut", s.context_cut);
    v("malformed_tasks", s.malformed_tasks), v("generated_tokens", s.generated_tokens);
    v("generate_seconds", s.generate_seconds), v("task_wait_seconds", s.task_wait_seconds);
    v("weight_pull_seconds", s.weight_pull_seconds), v("policies", s.policies);
    v("reward_correct", s.reward_correct), v("reward_wrong", s.reward_wrong);
    v("reward_no_answer", s.reward_no_answer), v("reward_invalid", s.reward_invalid);
    v("reward_timeout", s.reward_timeout), v("reward_crashed", s.reward_crashed);
    v("reward_memory_limit", s.reward_memory_limit);
    v("reward_other", s.reward_other), v("reward_unstated", s.reward_unstated);
    v("reward_env_error", s.reward_env_error);
    v("backend_requests", s.backend_requests), v("backend_retries", s.backend_retries);
    v("backend_failed", s.backend_failed), v("backend_transport_errors", s.backend_transport_errors);
    v("backend_http_errors", s.backend_http_errors), v("backend_malformed", s.backend_malformed);
    v("failed_episodes", s.failed_episodes), v("tasks_returned", s.tasks_returned), v("server_lost", s.server_lost);
    v("backend_weight_updates", s.backend_weight_updates);
    v("backend_resumed", s.backend_resumed), v("backend_resumed_tokens", s.backend_resumed_tokens);
    v("backend_server_starts", s.backend_server_starts), v("backend_server_restarts", s.backend_server_restarts);
    v("backend_prompt_tokens", s.backend_prompt_tokens);
    v("backend_cached_prompt_tokens", s.backend_cached_prompt_tokens);
    v("backend_weight_update_failures", s.backend_weight_update_failures);
    v("served_folders_written", s.served_folders_written), v("backend_request_seconds", s.backend_request_seconds);
    v("weight_write_seconds", s.weight_write_seconds), v("weight_load_seconds", s.weight_load_seconds);
    v("engine_steps", s.engine_steps), v("engine_prefill_tokens", s.engine_prefill_tokens);
    v("engine_shared_prompt_tokens", s.engine_shared_prompt_tokens);
    v("engine_decode_tokens", s.engine_decode_tokens), v("engine_admission_waits", s.engine_admission_waits);
    v("engine_preemptions", s.engine_preemptions), v("engine_recomputed_tokens", s.engine_recomputed_tokens);
    v("engine_peak_kv_bytes", s.engine_peak_kv_bytes), v("engine_kv_pool_bytes", s.engine_kv_pool_bytes);
    v("engine_moved_sequences", s.engine_moved_sequences);
    v("engine_reused_context_tokens", s.engine_reused_context_tokens);
    v("spanning_versions", s.spanning_versions);
    v("verifier_started", s.verifier_started), v("verifier_restarts", s.verifier_restarts);
    v("mcp_calls", s.mcp_calls), v("mcp_errors", s.mcp_errors), v("mcp_timeouts", s.mcp_timeouts);
    v("mcp_restarts", s.mcp_restarts), v("mcp_malformed", s.mcp_malformed);
    v("openenv_sessions", s.openenv_sessions), v("openenv_steps", s.openenv_steps);
    v("openenv_errors", s.openenv_errors), v("openenv_timeouts", s.openenv_timeouts);
    v("openenv_malformed", s.openenv_malformed), v("openenv_restarts", s.openenv_restarts);
    v("environment_jobs", s.environment_jobs), v("stream_steps", s.stream_steps);
    v("stream_steps_beside_environment", s.stream_steps_beside_environment);
  }
};

struct TrainerReport {
  std::uint64_t steps = 0;
  std::int64_t final_version = 0;
  std::uint64_t trajectories_trained = 0;
  std::uint64_t tokens_trained = 0;
  double batch_wait_seconds = 0;
  double step_seconds = 0;
  std::uint64_t foreign_trajectories = 0;  // trained trajectories generated for another policy
  std::uint64_t trajectories_from_remote_sites = 0;
  std::int64_t max_staleness = 0;
  std::uint64_t staleness_violations = 0;
  std::uint64_t version_mismatches = 0;
  std::uint64_t skipped_steps = 0;
  double mean_reward = 0;
  // Largest |log π_θ − log π_behav| on a policy token before a step (the rollout's behaviour
  // log-prob against the trainer's recomputation; at staleness 0 the same version, so what is
  // left is bf16 weights and the engine's arithmetic: docs/rollout-backends.md).
  double max_abs_behav_diff = 0;
  // XXH3 of the final weights: equal across a data-parallel group, except that with sharded
  // parameters (or a simulated trainer) only the group's rank 0 holds them (the others: 0).
  std::uint64_t weights_hash = 0;
  // How batches went through the model (trainer.micro_batch_tokens, trainer.packing): passes with
  // gradients, tokens through them padding included, and the sequences' own tokens.
  std::uint64_t micro_batches = 0, forward_tokens = 0, sequence_tokens = 0;
  // Memory (model/device.hpp MemoryUse): the process's peak resident set, and on CUDA the
  // caching allocator's peak of allocated bytes (0 on the CPU).
  std::uint64_t peak_rss_bytes = 0, device_peak_bytes = 0;
  std::uint64_t optimizer_state_bytes = 0;  // this rank's AdamW state (a shard of it with ZeRO-1)
  std::uint64_t checkpoints_skipped = 0;    // not written: their filesystem could not hold them

  double waitFraction() const {
    return batch_wait_seconds + step_seconds > 0 ? batch_wait_seconds / (batch_wait_seconds + step_seconds) : 0.0;
  }

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("steps", s.steps), v("final_version", s.final_version), v("trajectories_trained", s.trajectories_trained);
    v("tokens_trained", s.tokens_trained), v("batch_wait_seconds", s.batch_wait_seconds);
    v("step_seconds", s.step_seconds), v("foreign_trajectories", s.foreign_trajectories);
    v("trajectories_from_remote_sites", s.trajectories_from_remote_sites), v("max_staleness", s.max_staleness);
    v("staleness_violations", s.staleness_violations), v("version_mismatches", s.version_mismatches);
    v("skipped_steps", s.skipped_steps), v("mean_reward", s.mean_reward), v("weights_hash", s.weights_hash);
    v("max_abs_behav_diff", s.max_abs_behav_diff), v("micro_batches", s.micro_batches);
    v("forward_tokens", s.forward_tokens), v("sequence_tokens", s.sequence_tokens);
    v("peak_rss_bytes", s.peak_rss_bytes), v("device_peak_bytes", s.device_peak_bytes);
    v("optimizer_state_bytes", s.optimizer_state_bytes), v("checkpoints_skipped", s.checkpoints_skipped);
  }
};

// One policy's books and weight-store figures at the dataflow rank.
struct PolicyBooks {
  static constexpr const char* kJsonKey = "policy.{name}.{field}";
  std::string name;
  std::int64_t versions = 0;  // published
  std::uint64_t produced = 0, accepted = 0, filtered = 0, stale_dropped = 0, consumed = 0, replayed = 0;
  std::uint64_t buffered = 0;
  std::uint64_t weights_deltas_logged = 0, weights_deltas_skipped = 0, weights_delta_bytes_logged = 0;
  std::uint64_t weights_changed_elements = 0, weights_compared_elements = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("versions", s.versions), v("produced", s.produced), v("accepted", s.accepted);
    v("filtered", s.filtered), v("stale_dropped", s.stale_dropped), v("consumed", s.consumed);
    v("replayed", s.replayed), v("buffered", s.buffered), v("weights_deltas_logged", s.weights_deltas_logged);
    v("weights_deltas_skipped", s.weights_deltas_skipped);
    v("weights_delta_bytes_logged", s.weights_delta_bytes_logged);
    v("weights_changed_elements", s.weights_changed_elements);
    v("weights_compared_elements", s.weights_compared_elements);
  }
};

// A workflow role's held-out reward at the first and last evaluation (< 0: none).
struct RoleEvalReward {
  static constexpr const char* kJsonKey = "role.{name}.{field}";
  std::string name;
  double eval_reward_start = -1, eval_reward_end = -1;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("eval_reward_start", s.eval_reward_start), v("eval_reward_end", s.eval_reward_end);
  }
};

// One evaluation set's scores in a run's last round (eval.sets; docs/tasks.md "Evaluation").
struct EvalSetScore {
  static constexpr const char* kJsonKey = "eval_set.{name}.{field}";
  std::string name;
  double accuracy = -1, pass_at_k = -1;
  std::uint64_t problems = 0, samples = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("accuracy", s.accuracy), v("pass_at_k", s.pass_at_k), v("problems", s.problems);
    v("samples", s.samples);
  }
};

// One counter of a data plug-in. Plug-ins are named by the config and each kind keeps its own
// counters (a filter: kept/dropped, a curator: admitted/skipped, …), hence name + counter.
struct PluginCount {
  static constexpr const char* kJsonKey = "plugin.{name}.{counter}";
  std::string name;  // the plug-in's key: "<kind>.<index>.<plugin>@<policy>"
  std::string counter;
  std::uint64_t value = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("counter", s.counter), v("value", s.value);
  }
};

// One remote site that joined, at the home dataflow rank.
struct SiteFigures {
  static constexpr const char* kJsonKey = "site.{name}.{field}";
  std::string name;
  std::uint64_t rollout_ranks = 0, tasks_sent = 0, trajectories = 0, weight_updates = 0, weight_full_updates = 0;
  std::uint64_t weight_bytes = 0, weight_requests_deferred = 0, max_queued_bytes = 0;
  bool lost = false;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("rollout_ranks", s.rollout_ranks), v("tasks_sent", s.tasks_sent);
    v("trajectories", s.trajectories), v("weight_updates", s.weight_updates);
    v("weight_full_updates", s.weight_full_updates), v("weight_bytes", s.weight_bytes);
    v("weight_requests_deferred", s.weight_requests_deferred), v("max_queued_bytes", s.max_queued_bytes);
    v("lost", s.lost);
  }
};

// The home dataflow rank's remote sites (cross_site.listen set). sites_auth_failed: gateways
// refused in the handshake because the keys differ, plus sites dropped for a frame whose tag
// did not verify (those are in sites_lost too).
struct SiteHubFigures {
  std::uint64_t sites_refused = 0, sites_malformed = 0, site_tasks_reissued = 0, sites_stalled = 0;
  std::uint64_t sites_joined = 0, sites_lost = 0, sites_auth_failed = 0;
  std::vector<SiteFigures> sites;  // those that joined

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("sites_refused", s.sites_refused), v("sites_malformed", s.sites_malformed);
    v("sites_auth_failed", s.sites_auth_failed);
    v("site_tasks_reissued", s.site_tasks_reissued), v("sites_stalled", s.sites_stalled);
    v("sites_joined", s.sites_joined), v("sites_lost", s.sites_lost), v("sites", s.sites);
  }
};

// The dataflow rank's spawned pools (elastic.mode set).
struct ElasticFigures {
  std::uint64_t elastic_spawned_ranks = 0, elastic_spawn_failures = 0, elastic_retired_ranks = 0;
  std::uint64_t elastic_lost_ranks = 0, elastic_tasks_reissued = 0, elastic_duplicates_dropped = 0;
  std::uint64_t elastic_pools = 0, elastic_unreturned_tasks = 0;
  std::uint64_t elastic_tasks_given_back = 0;  // spawned ranks of a server-backed pool could not run them: re-queued

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("elastic_spawned_ranks", s.elastic_spawned_ranks), v("elastic_spawn_failures", s.elastic_spawn_failures);
    v("elastic_retired_ranks", s.elastic_retired_ranks), v("elastic_lost_ranks", s.elastic_lost_ranks);
    v("elastic_tasks_reissued", s.elastic_tasks_reissued);
    v("elastic_duplicates_dropped", s.elastic_duplicates_dropped), v("elastic_pools", s.elastic_pools);
    v("elastic_unreturned_tasks", s.elastic_unreturned_tasks),
        v("elastic_tasks_given_back", s.elastic_tasks_given_back);
  }
};

struct DataflowReport {
  std::int64_t versions = 0;
  std::uint64_t produced = 0, accepted = 0, filtered = 0, filtered_nonfinite = 0, filtered_error = 0;
  std::uint64_t stale_dropped = 0, consumed = 0, batches = 0, buffered = 0, replayed = 0;
  std::uint64_t malformed = 0, unroutable = 0, tasks_unsent = 0;
  std::uint64_t eval_received = 0, eval_rounds = 0;
  double eval_accuracy_start = -1, eval_accuracy_end = -1;  // < 0: no evaluation
  double eval_pass_at_k_end = -1;                           // the last round's pass@k (eval.samples = k); < 0: none
  std::int64_t eval_version_end = -1;                       // the weight version of the last round
  std::vector<EvalSetScore> eval_sets;                      // the last round's, set by set
  std::int64_t eval_best_version = -1;                      // the round of the best mean (version > 0); -1: none
  double eval_best_mean = -1;
  double wall_seconds = 0, segment_wall_seconds = 0;
  std::uint64_t trajectories_written = 0;
  std::vector<PolicyBooks> policies;
  std::vector<RoleEvalReward> roles;  // multi-agent workflows
  std::vector<PluginCount> plugins;
  std::optional<SiteHubFigures> cross_site;
  std::optional<ElasticFigures> elastic;
  // Server pools (docs/rollout-backends.md): tasks their ranks gave back, tasks re-issued (given
  // back, or held by a lost pool), late results dropped as duplicates, ranks and pools lost.
  std::uint64_t tasks_returned = 0, tasks_reissued = 0, returned_duplicates = 0, rollout_ranks_lost = 0;
  std::uint64_t pools_lost = 0;
  std::uint64_t checkpoints_skipped = 0;  // its checkpoint parts not written: no room on their filesystem
  std::uint64_t checkpoints_pruned = 0;   // older checkpoints removed (run.keep_checkpoints)

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("versions", s.versions), v("produced", s.produced), v("accepted", s.accepted), v("filtered", s.filtered);
    v("filtered_nonfinite", s.filtered_nonfinite), v("filtered_error", s.filtered_error);
    v("stale_dropped", s.stale_dropped), v("consumed", s.consumed), v("batches", s.batches);
    v("buffered", s.buffered), v("replayed", s.replayed), v("malformed", s.malformed);
    v("unroutable", s.unroutable), v("tasks_unsent", s.tasks_unsent), v("eval_received", s.eval_received);
    v("eval_rounds", s.eval_rounds), v("eval_accuracy_start", s.eval_accuracy_start);
    v("eval_accuracy_end", s.eval_accuracy_end), v("eval_pass_at_k_end", s.eval_pass_at_k_end);
    v("eval_version_end", s.eval_version_end), v("eval_sets", s.eval_sets);
    v("eval_best_version", s.eval_best_version), v("eval_best_mean", s.eval_best_mean);
    v("wall_seconds", s.wall_seconds);
    v("segment_wall_seconds", s.segment_wall_seconds);
    v("trajectories_written", s.trajectories_written);
    v("policies", s.policies), v("roles", s.roles), v("plugins", s.plugins), v("cross_site", s.cross_site);
    v("elastic", s.elastic), v("tasks_returned", s.tasks_returned), v("tasks_reissued", s.tasks_reissued);
    v("returned_duplicates", s.returned_duplicates), v("rollout_ranks_lost", s.rollout_ranks_lost);
    v("pools_lost", s.pools_lost), v("checkpoints_skipped", s.checkpoints_skipped);
    v("checkpoints_pruned", s.checkpoints_pruned);
  }
};

// One policy's weight updates at a remote site's gateway.
struct GatewayPolicyFigures {
  static constexpr const char* kJsonKey = "{field}.{name}";
  std::string name;
  std::uint64_t weight_updates = 0, weight_full_updates = 0, weight_bytes = 0, weight_updates_rejected = 0;
  std::int64_t final_version = -1;
  std::uint64_t weights_hash = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("name", s.name), v("weight_updates", s.weight_updates), v("weight_full_updates", s.weight_full_updates);
    v("weight_bytes", s.weight_bytes), v("weight_updates_rejected", s.weight_updates_rejected);
    v("final_version", s.final_version), v("weights_hash", s.weights_hash);
  }
};

struct GatewayReport {
  std::uint64_t tasks_received = 0, tasks_dropped = 0, trajectories_forwarded = 0, trajectories_undelivered = 0;
  std::uint64_t malformed = 0;
  bool home_lost = false;
  std::vector<GatewayPolicyFigures> policies;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("tasks_received", s.tasks_received), v("tasks_dropped", s.tasks_dropped);
    v("trajectories_forwarded", s.trajectories_forwarded), v("trajectories_undelivered", s.trajectories_undelivered);
    v("malformed", s.malformed), v("home_lost", s.home_lost), v("policies", s.policies);
  }
};

// The figures of one role; the variant's alternative is the role.
using RoleReport = std::variant<DataflowReport, RolloutReport, TrainerReport, GatewayReport>;

struct RankReport {
  std::int32_t rank = 0;  // the rank in traces and trajectories (a spawned pool's: 10000·(k+1)+r)
  std::string label;      // "trainer:solver", "rollout:spawn0", …
  RoleReport figures;
  // The memory plan's total for this rank (0: not checked) and its measured peak resident set
  // (VmHWM, shared pages it touched included); the plan less its node-shared items and the
  // sampled peak of private memory (RssAnon: run/private_memory_peak.hpp), which compare per rank.
  std::uint64_t memory_plan_bytes = 0, peak_rss_bytes = 0;
  std::uint64_t memory_plan_private_bytes = 0, peak_private_bytes = 0;
  // User + system CPU seconds of the process so far (this segment), and of its start-up (MPI, the
  // model and windows, up to its role's loop): against the wall time, how much of a core the
  // rank used (docs/simulation.md: many simulated ranks on few cores).
  double cpu_seconds = 0, startup_cpu_seconds = 0;

  const char* roleName() const;  // "dataflow", "rollout", "trainer" or "gateway"
};

// Where a role leaves its figures while it runs (src/run/rank_report_files.cpp: every
// run.flush_seconds, into <run>/trace/rank_<r>.report): a rank that is killed keeps the last
// ones it left, which `astraflow trace` reads. due() is cheap; the figures are made only when due.
class ReportSink {
 public:
  virtual ~ReportSink() = default;
  virtual bool due() const = 0;
  virtual void write(const RoleReport& figures) = 0;
};

// Wire form: a u16 format version, the rank, the label, the plan and measured figures, the role's
// index, then the fields in their listed order (strings and vectors length-prefixed, an optional
// as a u8 flag).
std::vector<std::byte> encodeRankReport(const RankReport& report);
// Throws Error naming the field and byte offset on truncated, over-long or mistyped input.
RankReport decodeRankReport(std::span<const std::byte> bytes);

}  // namespace astraflow
