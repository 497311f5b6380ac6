// A RaaS rank's loop: take tasks, run the episodes with the engine, return trajectories, and
// refresh weights from the store when a newer version is published.
#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>

#include "astraflow/rollout/raas_role.hpp"

#include "astraflow/comm/backoff.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "astraflow/rollout/simulated_backend.hpp"
#include "astraflow/rollout/workflow.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "rollout/rollout_rank.hpp"
#include "rollout/served_weights.hpp"
#include "rollout/server_probe.hpp"

namespace astraflow {

namespace rollout_detail {

using namespace std::chrono_literals;

RolloutRank::RolloutRank(const RolloutPorts& ports)
    : ports_(ports),
      ctx_(ports.ctx),
      tokenizer_(makeEnvironmentTokenizer(ctx_.cfg.environment)),
      device_(resolveDevice(ctx_.cfg.rollout.compute.device, ctx_.device_slot, "rollout.device")),
      generator_(makeGenerator(device_, ctx_.cfg.run.seed * 7919 + 17 + static_cast<std::uint64_t>(ctx_.label_rank))) {
  for (const auto& s : ports.served) {
    ServedPolicy p;
    p.name = s.policy;
    p.group = s.group;
    p.store = s.store;
    p.node = s.node;
    const auto& spec = ports.backend;
    if (spec.isSimulated()) {
      // No model: pulled versions are kept as bytes; the backend draws lengths and rewards.
      std::vector<std::int32_t> never = {tokenizer_->padId()};
      if (tokenizer_->bosId() >= 0) never.push_back(tokenizer_->bosId());
      auto sim = std::make_unique<SimulatedBackend>(
          spec.simulated, ctx_.cfg.findPolicy(s.policy)->model.max_seq_len, tokenizer_->vocabSize(), std::move(never),
          // label_rank, not rank: a spawned pool's ranks must not repeat the layout's streams.
          ctx_.cfg.run.seed * 7919 + 29 + static_cast<std::uint64_t>(ctx_.label_rank));
      p.simulated = sim.get();
      if (spec.simulated.batching == SimulatedBackendSpec::Batching::Continuous)
        p.simulated_sequences = std::make_unique<SimulatedSequences>(*sim);
      p.backend = std::move(sim);
    } else if (spec.http()) {
      // The server generates. This rank's model holds no weights of its own: bf16 on the CPU, its
      // parameters view the node's copy of a version while it writes the version out and probes
      // the server (at Qwen3-8B, 0 bytes against 33 GB for an fp32 copy per rank and policy).
      p.model = buildPolicyModel(ctx_.cfg, tokenSpecOf(*tokenizer_), s.policy, torch::kCPU, torch::kBFloat16,
                                 InitialWeights::FromStore);
      std::vector<std::int32_t> never;
      for (auto id : p.model->neverGenerate()) never.push_back(static_cast<std::int32_t>(id));
      RolloutBackendSpec own = spec;  // this policy's servers (backend.policy_urls), else the pool's
      own.urls = spec.urlsFor(s.policy);
      auto http =
          std::make_unique<HttpBackend>(own, ports.index_in_pool, p.model->config().max_seq_len, std::move(never));
      p.http = http.get();
      if (!ctx_.cfg.workflow.multiAgent()) p.http_sequences = std::make_unique<HttpSequences>(*http);
      p.backend = std::move(http);
      const std::filesystem::path dir =
          spec.weights_dir.empty() ? ctx_.run_dir / "served_weights" : std::filesystem::path(spec.weights_dir);
      p.folders = std::make_unique<rollout_detail::ServedWeights>(
          dir, s.policy, p.model, spec.keep_versions, spec.api == HttpApi::Vllm ? HfHead::Separate : HfHead::AsModel);
    } else {
      // Its weights come from the store: every task waits for a version (waitForVersions).
      p.model = buildPolicyModel(ctx_.cfg, tokenSpecOf(*tokenizer_), s.policy, device_,
                                 computeDtype(ctx_.cfg.rollout.compute), InitialWeights::FromStore);
      const auto& compute = ctx_.cfg.rollout.compute;
      if (!compute.bf16() && compute.engineBf16(p.model->parameterCount()))
        p.model->placeUninitialised(device_, torch::kBFloat16);  // `auto`, a real-size model, bf16 instructions
      p.model->eval();
      p.model->setPrepackedWeights(ctx_.cfg.rollout.prepacked_weights);  // applies on the CPU in fp32 only
      // bf16 on the CPU: the node's copy is the engine's parameters, no copy of its own.
      p.in_place = canViewWeights(*p.model);
      p.engine = std::make_unique<GenerationEngine>(p.model, tokenizer_->padId(), schedulingFrom(ctx_.cfg));
      p.backend = std::make_unique<EngineBackend>(*p.engine, generator_);
    }
    served_.push_back(std::move(p));
  }
}

ServedPolicy& RolloutRank::served(const std::string& policy) {
  for (auto& p : served_) {
    if (p.name == policy) return p;
  }
  throw Error(
      fmt::format("rollout rank {} got a task for policy '{}', which its pool does not serve", ctx_.rank, policy));
}

// Each policy refreshes on its own: a newer version of one never waits for the others. A pull
// happens here, between batches of episodes or steps of the engine, when this rank chooses
// (request-based, §8): the first rank of the node to want a version pulls it into the node's
// shared copy (NodeWeights), and every rank of the node moves to the node's newest version here.
bool RolloutRank::refreshWeights(bool force) {
  serveRelays();
  bool pulled = false;
  update_failed_ = false;
  for (auto& p : served_) {
    const std::int64_t published = p.store->publishedVersion();
    const std::int64_t held = p.held.version;
    const bool wanted = published > held && (force || held < 0 || published - held >= ctx_.cfg.weights.pull_every);
    const double t = ctx_.now();
    const std::uint64_t bytes_before = p.store->stats().bytes_pulled;
    const NodeVersion v = p.node->refresh(*p.store, wanted ? published : -1);
    if (v.version > held) {
      ++p.pulls;
      pull_seconds_ += ctx_.now() - t;
      // Bytes: what this rank read from the store for its node (0 when another rank of it did).
      ctx_.event(TraceKind::WeightPull, t, v.version, p.store->stats().bytes_pulled - bytes_before, 0,
                 {.policy = p.group});
      p.held = v;
      if (p.simulated) {
        p.version = v.version;
        p.simulated->setVersion(v.version);
        pulled = true;
      } else if (!p.http) {
        if (p.in_place)
          viewWeights(v.bytes, *p.model);
        else
          unpackWeights(v.bytes, *p.model);
        p.version = v.version;
        pulled = true;
      }
    }
    if (p.http && p.held.version > p.version && v.version == p.held.version) {
      if (loadOnServer(p))
        pulled = true;
      else
        update_failed_ = true;
    }
    // Only an engine computing from the node's bytes keeps them bound; the others hold a copy.
    if (!p.in_place) p.node->release();
  }
  if (pulled) {
    // Between batches, at a new version: hand back the pages malloc keeps in its free lists. The
    // engine's per-layer buffers (under malloc's mmap threshold, so from its heap) vary in size
    // with each batch's shape and leave the heap fragmented: at the Qwen3-0.6B shape a rank held
    // ~0.8 GiB free but resident beside ~0.15 GiB in use (docs/memory.md). A fixed lower mmap
    // threshold would avoid it but cost 17 % of decode throughput in page faults; this costs a
    // heap walk per version.
    const double t = ctx_.now();
    malloc_trim(0);
    pull_seconds_ += ctx_.now() - t;
  }
  return pulled;
}

bool RolloutRank::behindPublished() const {
  for (const auto& p : served_) {
    if (p.version < p.store->publishedVersion()) return true;
  }
  return false;
}

bool RolloutRank::serverLost() const { return !lostServer().empty(); }

std::string RolloutRank::lostServer() const {
  for (const auto& p : served_) {
    if (p.server && p.server->givenUp())
      return fmt::format("{} given up after {} restarts (backend.launch.max_restarts)", p.http->url(),
                         p.server->restarts());
    if (p.http && p.http->unreachableSeconds() > ports_.backend.lost_after_seconds)
      return fmt::format("{} silent for {:.0f} s (backend.lost_after_seconds)", p.http->url(),
                         p.http->unreachableSeconds());
  }
  // An environment server whose program cannot run: every episode of this rank would fail.
  if (const std::string why = openEnvUnavailable(); !why.empty())
    return fmt::format("of environment.openenv.command cannot start ({})", why);
  return {};
}

// Between batches, with no request of this rank in flight: the version is written once as a
// folder, the server loads it, and only its confirmation moves the version trajectories report.
bool RolloutRank::loadOnServer(ServedPolicy& p) {
  const double t = ctx_.now();
  std::filesystem::path folder;
  try {
    folder = p.folders->materialise(p.held.bytes, p.held.version, p.held.hash);
  } catch (const std::exception& e) {
    spdlog::error("rollout rank {}: version {} of {} cannot be written for the server: {}", ctx_.rank, p.held.version,
                  p.name, e.what());
    return false;
  }
  write_seconds_ += ctx_.now() - t;
  if (ports_.backend.launch.enabled() && !p.server) startServer(p, folder);
  if (!p.http->loadWeights(folder.string(), p.held.version)) {
    // A server that keeps saying no (a wrong endpoint, a server without its update API) would have
    // the run go on generating from weights that never change, training nothing: an error instead.
    if (p.http->updatesRefusedInRow() >= ports_.backend.update_failures)
      throw Error(fmt::format(
          "rollout rank {}: the server {} refused {} weight updates of policy '{}' in a row (layout's "
          "backend.update_failures); the last: {}. Check backend.api and the server's weight-update endpoint "
          "(docs/rollout-backends.md)",
          ctx_.rank, p.http->url(), p.http->updatesRefusedInRow(), p.name, p.http->lastRefusal()));
    return false;
  }
  p.version = p.held.version;
  p.folders->collect(p.version);
  if (!p.probed) checkServerLogprobs(p);
  ctx_.event(TraceKind::WeightLoad, t, p.version, p.held.bytes.size(), 0, {.policy = p.group});
  return true;
}

// Once per server and policy, at the first version it confirmed: its log-probs of a sampled answer
// against this rank's model with the same bits. A server reporting another distribution's
// log-probs (vLLM's default, before the temperature) would bias every importance ratio of the run.
void RolloutRank::checkServerLogprobs(ServedPolicy& p) {
  p.probed = true;
  const double tolerance = ports_.backend.logprob_tolerance;
  if (tolerance <= 0) return;
  const ProbeResult r = probeServerLogprobs(*p.http, *p.model, p.held.bytes, samplingFrom(ctx_.cfg));
  if (!r.ran) {
    spdlog::warn("rollout rank {}: the server {} gave no probe answer; its log-probs are not checked", ctx_.rank,
                 p.http->url());
    return;
  }
  spdlog::info("rollout rank {}: server {} log-probs against policy '{}': mean |d| {:.2e}, max {:.2e} over {} tokens",
               ctx_.rank, p.http->url(), p.name, r.mean_abs, r.max_abs, r.tokens);
  if (r.mean_abs > tolerance)
    throw Error(fmt::format(
        "rollout rank {}: the server {} reports log-probs that differ from policy '{}' with the same weights by "
        "mean |d| {:.3f} over {} sampled tokens at temperature {} (backend.logprob_tolerance {}): the trainer's "
        "importance ratios would be wrong. A vLLM server must run with --logprobs-mode processed_logprobs; "
        "SGLang without SGLANG_RETURN_ORIGINAL_LOGPROB; and serve the policy's own model",
        ctx_.rank, p.http->url(), p.name, r.mean_abs, r.tokens, ctx_.cfg.rollout.temperature, tolerance));
}

// Waits until every policy holds the version the tasks ask for: "min_version" for the task's
// own policy, "min_version.<policy>" for the others of a team.
void RolloutRank::waitForVersions(const std::vector<Task>& tasks) {
  std::map<std::string, std::int64_t> needed;
  for (const auto& t : tasks) {
    needed.emplace(t.policy, 0);  // some weights, at least: never a task on the untrained init
    for (const auto& [key, value] : t.metadata) {
      if (key == kTaskMinVersionKey) {
        needed[t.policy] = std::max<std::int64_t>(needed[t.policy], std::stoll(value));
      } else if (key.rfind(std::string(kTaskMinVersionKey) + ".", 0) == 0) {
        const std::string policy = key.substr(std::string(kTaskMinVersionKey).size() + 1);
        needed[policy] = std::max<std::int64_t>(needed[policy], std::stoll(value));
      }
    }
  }
  // A team's task may call any policy this rank serves, and an engine's weights exist only once
  // pulled (InitialWeights::FromStore): every one has a version before any task runs.
  for (const auto& p : served_) needed.emplace(p.name, 0);
  Backoff backoff(2000us);
  auto behind = [&] {
    for (const auto& [policy, version] : needed) {
      if (served(policy).version < version) return true;
    }
    return false;
  };
  while (behind()) {
    if (refreshWeights(true)) continue;
    // A server that would not load the version (refused, or gone past the retries): the tasks run
    // on what it has, tagged with that version; the staleness rules of the dataflow rank decide.
    if (update_failed_) break;
    backoff.wait();
  }
}

void RolloutRank::pushTrajectory(const Trajectory& t) {
  encodeInto(t, record_);
  auto& ring = *ports_.trajectories;
  try {
    ring.push(record_);
  } catch (const RecordTooLarge&) {
    // Too large for the trajectory ring: refused, counted here, and reported to the dataflow
    // rank as an error-status stand-in so the group completes and the loss is on the books.
    if (oversize_++ < 5) {
      spdlog::warn(
          "trajectory of task {} takes {} bytes, more than dataflow.trajectory_ring holds ({}); sent as an "
          "error record",
          t.task_id, record_.size(), ring.maxRecordBytes());
    }
    Trajectory stub = t;
    stub.tokens.clear();
    stub.behav_logprobs.clear();
    stub.policy_mask.clear();
    stub.status = static_cast<std::uint8_t>(TrajectoryStatus::Error);
    encodeInto(stub, record_);
    ring.push(record_);
  }
}

namespace {

// Each policy token's version as its generator recorded it, else the version the rank held;
// the trajectory's version range is its policy tokens' (staleness is judged by the oldest).
void setTokenVersions(Trajectory& t, const Episode& e, std::int64_t held) {
  const bool recorded = e.token_versions.size() == e.tokens.size();
  std::vector<std::int64_t> versions(t.tokens.size(), kContextVersion);
  std::int64_t low = std::numeric_limits<std::int64_t>::max(), high = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (!t.policy_mask[i]) continue;
    versions[i] = recorded && e.token_versions[i] >= 0 ? e.token_versions[i] : held;
    low = std::min(low, versions[i]);
    high = std::max(high, versions[i]);
  }
  if (low > high) return;  // no policy token: the range stays as set
  t.weight_version_min = low;
  t.weight_version_max = high;
  t.version_runs = versionRunsOf(versions);
  compactVersionRuns(t);
}

}  // namespace

Trajectory RolloutRank::trajectoryOf(const Task& task, const Episode& e, const ServedPolicy& p, double t_start,
                                     double t_end) {
  Trajectory t;
  t.task_id = task.task_id;
  t.problem_id = task.problem_id;
  t.group_id = task.group_id;
  t.group_index = task.group_index;
  t.policy = p.name;
  t.producer_rank = ctx_.label_rank;
  t.pool_uid = static_cast<std::uint32_t>(ports_.pool);
  t.weight_version_min = t.weight_version_max = p.version;
  if (e.weight_version_min >= 0) {
    // The versions the server reported generating with (a server shared by several ranks may have
    // moved on between this rank's update and the request).
    t.weight_version_min = e.weight_version_min;
    t.weight_version_max = e.weight_version_max;
  }
  t.tokens = e.tokens;
  t.behav_logprobs = e.behav_logprobs;
  t.policy_mask = e.policy_mask;
  // A transcript past the policy's context — a team role's rendered prompt longer than
  // model.max_seq_len leaves no room to generate — is cut there and marked truncated: no trainer
  // is sent a sequence its model cannot take.
  bool cut = false;
  const PolicySection* section = ctx_.cfg.findPolicy(p.name);
  if (section != nullptr && section->model.max_seq_len > 0 &&
      t.tokens.size() > static_cast<std::size_t>(section->model.max_seq_len)) {
    const auto limit = static_cast<std::size_t>(section->model.max_seq_len);
    if (context_cut_++ < 3)
      spdlog::warn(
          "policy '{}': a transcript of {} tokens is cut to model.max_seq_len {} (raise it for this "
          "workflow's prompts)",
          p.name, t.tokens.size(), limit);
    t.tokens.resize(limit);
    t.behav_logprobs.resize(limit);
    t.policy_mask.resize(limit);
    cut = true;
  }
  setTokenVersions(t, e, p.version);
  t.rewards = {e.reward};
  t.t_queued = t.t_started = t_start;
  t.t_finished = t_end;
  t.turns = static_cast<std::uint32_t>(e.turns);
  t.status = static_cast<std::uint8_t>(e.nonfinite          ? TrajectoryStatus::Nonfinite
                                       : e.truncated || cut ? TrajectoryStatus::Truncated
                                                            : TrajectoryStatus::Ok);
  if (e.failed) {
    // The backend could not produce it: the task goes back to the dataflow rank, which re-issues
    // it (a record with no tokens, status Returned); nothing half-formed is trained on.
    t.tokens.clear();
    t.behav_logprobs.clear();
    t.policy_mask.clear();
    t.status = static_cast<std::uint8_t>(TrajectoryStatus::Returned);
    return t;
  }
  for (auto m : e.policy_mask) tokens_ += m;
  if (t.weight_version_min != t.weight_version_max) ++spanning_versions_;
  return t;
}

std::vector<std::uint64_t> problemsOf(const std::vector<Task>& tasks) {
  std::vector<std::uint64_t> problems;
  problems.reserve(tasks.size());
  for (const auto& t : tasks) problems.push_back(t.problem_id);
  return problems;
}

void RolloutRank::runSingle(const std::vector<Task>& tasks, ServedPolicy& p, const SamplingOptions& sampling,
                            bool eval) {
  const auto problems = problemsOf(tasks);
  const double t_start = ctx_.now();
  const auto episodes = runEpisodes(*p.backend, *tokenizer_, ctx_.cfg.environment, problems, sampling);
  const double t_end = ctx_.now();
  generate_seconds_ += t_end - t_start;
  const auto tokens_before = tokens_;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    pushTrajectory(trajectoryOf(tasks[i], episodes[i], p, t_start, t_end));
    if (episodes[i].failed) {
      ++failed_episodes_;
      ++returned_;
      continue;
    }
    ++(eval ? eval_pushed_ : pushed_);
    if (!eval) reasons_.countRewardReason(episodes[i].reward_reason);
  }
  ctx_.event(eval ? TraceKind::EvalGenerate : TraceKind::Generate, t_start, p.version, tokens_ - tokens_before,
             tasks.size());
}

// A team episode per task; one trajectory per role, each carrying its role, its policy's
// version and rewards {role reward, team reward}.
void RolloutRank::runTeam(const std::vector<Task>& tasks, const SamplingOptions& sampling, bool eval) {
  const auto& wf = ctx_.cfg.workflow;
  const auto problems = problemsOf(tasks);
  const double t_start = ctx_.now();
  bool failed = false;
  auto generate = [this, &failed](const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                                  const SamplingOptions& options) {
    auto out = served(policy).backend->generate(prompts, options);
    for (const auto& g : out) failed = failed || g.failed;
    return out;
  };
  auto team = runTeamEpisodes(wf, generate, *tokenizer_, ctx_.cfg.environment, problems, sampling);
  if (failed) {
    // A team episode is one conversation: a failed turn anywhere in the batch fails the batch's
    // trajectories (which episode it was is not traced through the workflow).
    for (auto& episode : team)
      for (auto& role : episode.roles) role.failed = true;
  }
  const double t_end = ctx_.now();
  generate_seconds_ += t_end - t_start;
  const auto tokens_before = tokens_;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    for (std::size_t r = 0; r < wf.roles.size(); ++r) {
      Trajectory t = trajectoryOf(tasks[i], team[i].roles[r], served(wf.roles[r].policy), t_start, t_end);
      t.role = wf.roles[r].name;
      t.rewards.push_back(team[i].team_reward);
      pushTrajectory(t);
      if (team[i].roles[r].failed) {
        ++failed_episodes_;
        if (r == 0) ++returned_;  // one task, given back once (the other roles' records are ignored)
        continue;
      }
      ++(eval ? eval_pushed_ : pushed_);
      if (!eval) reasons_.countRewardReason(team[i].roles[r].reward_reason);
    }
  }
  ctx_.event(eval ? TraceKind::EvalGenerate : TraceKind::Generate, t_start, served_.front().version,
             tokens_ - tokens_before, tasks.size() * wf.roles.size());
}

SamplingOptions RolloutRank::samplingFor(bool eval) const {
  SamplingOptions sampling = samplingFrom(ctx_.cfg);
  if (eval) {
    sampling.greedy = ctx_.cfg.eval.temperature == 0.0;
    if (!sampling.greedy) sampling.temperature = ctx_.cfg.eval.temperature;
    return sampling;
  }
  // A workload whose generations lengthen as training goes (bench_autoscale); the model's
  // max_seq_len still bounds every sequence.
  const double v = static_cast<double>(std::max<std::int64_t>(0, served_.front().version));
  sampling.max_new_tokens += static_cast<int>(ctx_.cfg.rollout.max_new_tokens_growth * v);
  sampling.min_new_tokens =
      std::min(sampling.max_new_tokens, static_cast<int>(ctx_.cfg.rollout.min_new_tokens_growth * v));
  return sampling;
}

void RolloutRank::runTasks(const std::vector<Task>& tasks, bool eval) {
  if (tasks.empty()) return;
  waitForVersions(tasks);
  const SamplingOptions sampling = samplingFor(eval);
  if (ctx_.cfg.workflow.multiAgent()) {
    runTeam(tasks, sampling, eval);
    return;
  }
  // Single-agent episodes: one batch per policy.
  for (auto& p : served_) {
    std::vector<Task> mine;
    for (const auto& t : tasks) {
      if (t.policy == p.name) mine.push_back(t);
    }
    if (!mine.empty()) runSingle(mine, p, sampling, eval);
  }
}

RolloutReport RolloutRank::run() {
  if (streams()) {
    runStreaming();
  } else {
    runBatches();
  }
  // The run's last versions are published before the end of the stream: pull them, so that every
  // rank ends on the trainers' final weights (and the report's checksums prove it). A node's
  // write can be put off while another rank of it still uses the spare copy: that rank comes
  // here too, so this waits for it.
  if (!lost_) {
    Backoff backoff(2000us);
    for (;;) {
      refreshWeights(true);
      if (update_failed_ || !behindPublished()) break;
      backoff.wait();
    }
  }
  // The last record of this rank: the dataflow rank counts one per rollout rank before it stops.
  Trajectory end = endOfStreamTrajectory(served_.front().name, ctx_.label_rank);
  if (lost_) end.status = static_cast<std::uint8_t>(TrajectoryStatus::Returned);
  encodeInto(end, record_);
  ports_.trajectories->push(record_);

  return report();
}

std::optional<Task> RolloutRank::popTask(bool& ended) {
  if (!task_polls_.due()) return std::nullopt;
  while (ports_.tasks->tryPop(record_)) {
    task_polls_.found();
    auto decoded = decodeTask(record_);
    if (!decoded) {
      if (malformed_++ < 5) spdlog::warn("malformed task record refused: {}", decoded.error());
      continue;
    }
    Task task = std::move(decoded).value();
    if (isEndOfStream(task)) {
      ended = true;
      return std::nullopt;
    }
    return task;
  }
  task_polls_.empty();
  return std::nullopt;
}

void RolloutRank::noteTaskWait(double& idle_since) {
  if (idle_since < 0) return;
  ctx_.event(TraceKind::TaskWait, idle_since, served_.front().version);
  wait_seconds_ += ctx_.now() - idle_since;
  idle_since = -1;
}

void RolloutRank::runBatches() {
  bool ended = false;
  std::vector<Task> train, eval;
  const std::size_t batch = static_cast<std::size_t>(ctx_.cfg.rollout.batch_tasks);
  double idle_since = -1;
  while (!ended) {
    reviveServers();
    if (serverLost()) {
      // Its server has said nothing for backend.lost_after_seconds (or was given up): the rank
      // leaves, holding no task (every failed one was given back), and its end of stream says why.
      lost_ = true;
      spdlog::error("rollout rank {}: server {}; leaving the pool", ctx_.rank, lostServer());
      break;
    }
    refreshWeights();
    train.clear();
    eval.clear();
    while (!ended && train.size() + eval.size() < batch) {
      auto task = popTask(ended);
      if (!task) break;
      (task->metadata.count(kTaskEvalKey) ? eval : train).push_back(std::move(*task));
    }
    if (train.empty() && eval.empty()) {
      if (ended) break;
      if (idle_since < 0) idle_since = ctx_.now();
      idleUntilTaskPoll();
      continue;
    }
    noteTaskWait(idle_since);
    runTasks(eval, true);
    runTasks(train, false);
    ctx_.snapshot([this] { return report(); });
  }
}

}  // namespace rollout_detail

RolloutReport runRolloutRole(const RolloutPorts& ports) {
  configureThreads(ports.ctx.cfg, ports.ctx.ranks_on_node, ports.ctx.cfg.rollout.compute.threads);
  return rollout_detail::RolloutRank(ports).run();
}

}  // namespace astraflow
