// RolloutRank::report (rollout_rank.hpp): what a rollout rank tells the summary at its end — its
// own counts, the processes and servers its episodes used (verifiers, MCP servers, OpenEnv
// servers), its http backends, its engines and its weight pulls.
#include <algorithm>

#include "astraflow/tasks/mcp_client.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "astraflow/tasks/reward_worker.hpp"
#include "rollout/rollout_rank.hpp"
#include "rollout/served_weights.hpp"

namespace astraflow::rollout_detail {
namespace {

// The process-wide verifier, MCP and OpenEnv counters (tasks/): one rank per process.
void addEnvironmentProcesses(RolloutReport& r) {
  const RewardWorkerCounters verifiers = sharedRewardWorkerCounters();
  r.verifier_started = verifiers.started;
  r.verifier_restarts = verifiers.restarts;
  const McpCounters tools = sharedMcpCounters();
  r.mcp_calls = tools.calls, r.mcp_errors = tools.errors, r.mcp_timeouts = tools.timeouts;
  r.mcp_restarts = tools.restarts, r.mcp_malformed = tools.malformed;
  const OpenEnvCounters env = sharedOpenEnvCounters();
  r.openenv_sessions = env.sessions, r.openenv_steps = env.steps, r.openenv_errors = env.errors;
  r.openenv_timeouts = env.timeouts, r.openenv_malformed = env.malformed, r.openenv_restarts = env.restarts;
}

void addHttpBackend(const ServedPolicy& p, RolloutReport& r) {
  const auto& st = p.http->stats();
  r.backend_requests += st.requests;
  r.backend_retries += st.retries;
  r.backend_failed += st.failed;
  r.backend_transport_errors += st.transport_errors;
  r.backend_http_errors += st.http_errors;
  r.backend_malformed += st.malformed;
  r.backend_weight_updates += st.weight_updates;
  r.backend_resumed += st.resumed;
  r.backend_resumed_tokens += st.resumed_tokens;
  r.backend_prompt_tokens += st.prompt_tokens;
  r.backend_cached_prompt_tokens += st.cached_prompt_tokens;
  r.backend_weight_update_failures += st.weight_update_failures;
  r.backend_request_seconds += st.request_seconds;
  r.weight_load_seconds += st.weight_load_seconds;
  r.served_folders_written += p.folders->written();
  if (p.server) {
    ++r.backend_server_starts;
    r.backend_server_restarts += static_cast<std::uint64_t>(p.server->restarts());
  }
}

void addEngine(const ServedPolicy& p, RolloutReport& r) {
  const SchedulerCounters c = p.engine->schedulerCounters();
  r.engine_steps += c.steps;
  r.engine_prefill_tokens += c.prefill_tokens;
  r.engine_shared_prompt_tokens += c.shared_prompt_tokens;
  r.engine_decode_tokens += c.decode_tokens;
  r.engine_admission_waits += c.admission_waits;
  r.engine_preemptions += c.preemptions;
  r.engine_recomputed_tokens += c.recomputed_tokens;
  r.engine_moved_sequences += c.moved_sequences;
  r.engine_reused_context_tokens += c.reused_context_tokens;
  r.engine_peak_kv_bytes = std::max<std::uint64_t>(r.engine_peak_kv_bytes, c.peak_kv_bytes);
  r.engine_kv_pool_bytes = std::max<std::uint64_t>(r.engine_kv_pool_bytes, c.kv_pool_bytes);
}

PolicyPullFigures pullFigures(const ServedPolicy& p) {
  const auto& st = p.store->stats();
  PolicyPullFigures f;
  f.name = p.name;
  f.final_version = p.version;
  f.weight_pulls = p.pulls;
  f.weight_full_pulls = st.full_pulls;
  f.weight_deltas_applied = st.deltas_applied;
  f.weight_deltas_rejected = st.deltas_rejected;
  f.node_deltas_kept = st.deltas_kept;
  f.weight_bytes_pulled = st.bytes_pulled;
  f.weight_version_bytes = p.held.bytes.size();
  f.torn_retries = st.torn_retries;
  f.weights_hash = p.held.hash;
  const auto& node = p.node->stats();
  f.node_ranks = static_cast<std::uint64_t>(p.node->nodeSize());
  f.node_versions_written = node.versions_written;
  f.node_writes_put_off = node.spare_in_use;
  const NodeRelayStats relay = p.node->relayStats();
  f.node_versions_relayed = relay.relayed;
  f.node_deltas_relayed = relay.deltas;
  f.node_relay_bytes = relay.bytes;
  f.node_relay_further_up = relay.further_up;
  return f;
}

}  // namespace

RolloutReport RolloutRank::report() {
  RolloutReport r = reasons_;  // its reward_* counts; the rest is set here
  r.pushed = pushed_;
  r.eval_pushed = eval_pushed_;
  r.oversize = oversize_;
  r.context_cut = context_cut_;
  r.malformed_tasks = malformed_;
  r.generated_tokens = tokens_;
  r.generate_seconds = generate_seconds_;
  r.task_wait_seconds = wait_seconds_;
  r.weight_pull_seconds = pull_seconds_;
  r.failed_episodes = failed_episodes_;
  r.spanning_versions = spanning_versions_;
  r.tasks_returned = returned_;
  r.server_lost = lost_ ? 1 : 0;
  r.weight_write_seconds = write_seconds_;
  r.environment_jobs = stream_counters_.environment_jobs;
  r.stream_steps = stream_counters_.source_steps;
  r.stream_steps_beside_environment = stream_counters_.source_steps_beside_env;
  addEnvironmentProcesses(r);
  for (const auto& p : served_) {
    if (p.http) addHttpBackend(p, r);
    if (p.engine) addEngine(p, r);
    r.policies.push_back(pullFigures(p));
  }
  return r;
}

}  // namespace astraflow::rollout_detail
