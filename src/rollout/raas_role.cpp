// A RaaS rank's loop: take tasks, run the episodes with the engine, return trajectories, and
// refresh weights from the store when a newer version is published.
#include <fmt/format.h>
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
#include "astraflow/rollout/workflow.hpp"
#include "astraflow/tasks/environment.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;

// One policy this rank serves: its model, engine and the version it holds.
struct ServedPolicy {
  std::string name;
  WeightStore* store = nullptr;
  PolicyModel model{nullptr};
  std::unique_ptr<GenerationEngine> engine;
  int group = 0;          // index of its trainer group and weight store
  WeightReplica replica;  // the bf16 weights as pulled (deltas apply to it in place)
  std::int64_t version = -1;
  std::uint64_t pulls = 0;
};

class RolloutRank {
 public:
  explicit RolloutRank(const RolloutPorts& ports)
      : ports_(ports),
        ctx_(ports.ctx),
        tokenizer_(makeEnvironmentTokenizer(ctx_.cfg.environment)),
        device_(resolveDevice(ctx_.cfg.rollout.compute.device, ctx_.device_slot, "rollout.device")),
        generator_(makeGenerator(device_, ctx_.cfg.run.seed * 7919 + 17 + static_cast<std::uint64_t>(ctx_.rank))) {
    for (const auto& s : ports.served) {
      ServedPolicy p;
      p.name = s.policy;
      p.group = s.group;
      p.store = s.store;
      p.model = buildPolicyModel(ctx_.cfg, tokenSpecOf(*tokenizer_), s.policy, device_,
                                 computeDtype(ctx_.cfg.rollout.compute));
      p.model->eval();
      p.engine = std::make_unique<GenerationEngine>(p.model, tokenizer_->padId());
      served_.push_back(std::move(p));
    }
  }

  RolloutReport run();

 private:
  ServedPolicy& served(const std::string& policy);
  // Pulls each policy the store is at least `weights.pull_every` versions ahead on (any newer
  // version when `force`, i.e. a task needs it).
  bool refreshWeights(bool force = false);
  void waitForVersions(const std::vector<Task>& tasks);
  void runTasks(const std::vector<Task>& tasks, bool eval);
  void runSingle(const std::vector<Task>& tasks, ServedPolicy& p, const SamplingOptions& sampling, bool eval);
  void runTeam(const std::vector<Task>& tasks, const SamplingOptions& sampling, bool eval);
  Trajectory trajectoryOf(const Task& task, const Episode& e, const ServedPolicy& p, double t_start, double t_end);
  void pushTrajectory(const Trajectory& t);

  const RolloutPorts& ports_;
  const RoleContext& ctx_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<ServedPolicy> served_;
  torch::Device device_;  // every served policy's engine: rollout.device
  at::Generator generator_;
  std::vector<std::byte> record_;
  // Report.
  std::uint64_t pushed_ = 0, eval_pushed_ = 0, oversize_ = 0, malformed_ = 0, tokens_ = 0;
  RolloutReport reasons_;  // only its reward_* counts: why training episodes got their rewards
  double generate_seconds_ = 0, wait_seconds_ = 0, pull_seconds_ = 0;
};

ServedPolicy& RolloutRank::served(const std::string& policy) {
  for (auto& p : served_) {
    if (p.name == policy) return p;
  }
  throw Error(
      fmt::format("rollout rank {} got a task for policy '{}', which its pool does not serve", ctx_.rank, policy));
}

// Each policy refreshes on its own: a newer version of one never waits for the others. A pull
// happens here, between batches of episodes, when this rank chooses (request-based, §8).
bool RolloutRank::refreshWeights(bool force) {
  bool pulled = false;
  for (auto& p : served_) {
    const std::int64_t published = p.store->publishedVersion();
    if (published <= p.version) continue;
    if (!force && p.version >= 0 && published - p.version < ctx_.cfg.weights.pull_every) continue;
    const double t = ctx_.now();
    const PullResult r = p.store->pull(p.replica);
    if (!r.moved) continue;
    unpackWeights(p.replica.blob, *p.model);
    p.version = r.version;
    ++p.pulls;
    pull_seconds_ += ctx_.now() - t;
    ctx_.event("weight_pull", t, r.version, r.bytes, 0, {.policy = p.group});
    pulled = true;
  }
  return pulled;
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
  Backoff backoff(2000us);
  auto behind = [&] {
    for (const auto& [policy, version] : needed) {
      if (served(policy).version < version) return true;
    }
    return false;
  };
  while (behind()) {
    if (!refreshWeights(true)) backoff.wait();
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
  t.tokens = e.tokens;
  t.behav_logprobs = e.behav_logprobs;
  t.policy_mask = e.policy_mask;
  t.rewards = {e.reward};
  t.t_queued = t.t_started = t_start;
  t.t_finished = t_end;
  t.turns = static_cast<std::uint32_t>(e.turns);
  t.status = static_cast<std::uint8_t>(e.nonfinite   ? TrajectoryStatus::Nonfinite
                                       : e.truncated ? TrajectoryStatus::Truncated
                                                     : TrajectoryStatus::Ok);
  for (auto m : e.policy_mask) tokens_ += m;
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
  const auto episodes = runEpisodes(*p.engine, *tokenizer_, ctx_.cfg.environment, problems, sampling, generator_);
  const double t_end = ctx_.now();
  generate_seconds_ += t_end - t_start;
  const auto tokens_before = tokens_;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    pushTrajectory(trajectoryOf(tasks[i], episodes[i], p, t_start, t_end));
    ++(eval ? eval_pushed_ : pushed_);
    if (!eval) reasons_.countRewardReason(episodes[i].reward_reason);
  }
  ctx_.event(eval ? "eval_generate" : "generate", t_start, p.version, tokens_ - tokens_before, tasks.size());
}

// A team episode per task; one trajectory per role, each carrying its role, its policy's
// version and rewards {role reward, team reward}.
void RolloutRank::runTeam(const std::vector<Task>& tasks, const SamplingOptions& sampling, bool eval) {
  const auto& wf = ctx_.cfg.workflow;
  const auto problems = problemsOf(tasks);
  const double t_start = ctx_.now();
  auto generate = [this](const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                         const SamplingOptions& options) {
    return served(policy).engine->generate(prompts, options, generator_);
  };
  const auto team = runTeamEpisodes(wf, generate, *tokenizer_, ctx_.cfg.environment, problems, sampling);
  const double t_end = ctx_.now();
  generate_seconds_ += t_end - t_start;
  const auto tokens_before = tokens_;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    for (std::size_t r = 0; r < wf.roles.size(); ++r) {
      Trajectory t = trajectoryOf(tasks[i], team[i].roles[r], served(wf.roles[r].policy), t_start, t_end);
      t.role = wf.roles[r].name;
      t.rewards.push_back(team[i].team_reward);
      pushTrajectory(t);
      ++(eval ? eval_pushed_ : pushed_);
      if (!eval) reasons_.countRewardReason(team[i].roles[r].reward_reason);
    }
  }
  ctx_.event(eval ? "eval_generate" : "generate", t_start, served_.front().version, tokens_ - tokens_before,
             tasks.size() * wf.roles.size());
}

void RolloutRank::runTasks(const std::vector<Task>& tasks, bool eval) {
  if (tasks.empty()) return;
  waitForVersions(tasks);
  SamplingOptions sampling = samplingFrom(ctx_.cfg);
  if (eval) {
    sampling.greedy = ctx_.cfg.eval.temperature == 0.0;
    if (!sampling.greedy) sampling.temperature = ctx_.cfg.eval.temperature;
  }
  if (!eval) {
    // A workload whose generations lengthen as training goes (bench_autoscale); the model's
    // max_seq_len still bounds every sequence.
    const double v = static_cast<double>(std::max<std::int64_t>(0, served_.front().version));
    sampling.max_new_tokens += static_cast<int>(ctx_.cfg.rollout.max_new_tokens_growth * v);
    sampling.min_new_tokens =
        std::min(sampling.max_new_tokens, static_cast<int>(ctx_.cfg.rollout.min_new_tokens_growth * v));
  }
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
  auto& tasks_ring = *ports_.tasks;
  Backoff idle(2000us);
  bool ended = false;
  std::vector<Task> train, eval;
  const std::size_t batch = static_cast<std::size_t>(ctx_.cfg.rollout.batch_tasks);
  double idle_since = -1;
  while (!ended) {
    refreshWeights();
    train.clear();
    eval.clear();
    while (train.size() + eval.size() < batch && tasks_ring.tryPop(record_)) {
      auto decoded = decodeTask(record_);
      if (!decoded) {
        if (malformed_++ < 5) spdlog::warn("malformed task record refused: {}", decoded.error());
        continue;
      }
      Task task = std::move(decoded).value();
      if (isEndOfStream(task)) {
        ended = true;
        break;
      }
      (task.metadata.count(kTaskEvalKey) ? eval : train).push_back(std::move(task));
    }
    if (train.empty() && eval.empty()) {
      if (ended) break;
      if (idle_since < 0) idle_since = ctx_.now();
      idle.wait();
      continue;
    }
    if (idle_since >= 0) {
      ctx_.event("task_wait", idle_since, served_.front().version);
      wait_seconds_ += ctx_.now() - idle_since;
      idle_since = -1;
    }
    idle.reset();
    runTasks(eval, true);
    runTasks(train, false);
  }
  // The run's last versions are published before the end of the stream: pull them, so that every
  // rank ends on the trainers' final weights (and the report's checksums prove it).
  refreshWeights(true);
  // The last record of this rank: the dataflow rank counts one per rollout rank before it stops.
  encodeInto(endOfStreamTrajectory(served_.front().name, ctx_.label_rank), record_);
  ports_.trajectories->push(record_);

  RolloutReport r = reasons_;  // its reward_* counts; the rest is set here
  r.pushed = pushed_;
  r.eval_pushed = eval_pushed_;
  r.oversize = oversize_;
  r.malformed_tasks = malformed_;
  r.generated_tokens = tokens_;
  r.generate_seconds = generate_seconds_;
  r.task_wait_seconds = wait_seconds_;
  r.weight_pull_seconds = pull_seconds_;
  for (const auto& p : served_) {
    const auto& st = p.store->stats();
    PolicyPullFigures f;
    f.name = p.name;
    f.final_version = p.version;
    f.weight_pulls = p.pulls;
    f.weight_full_pulls = st.full_pulls;
    f.weight_deltas_applied = st.deltas_applied;
    f.weight_deltas_rejected = st.deltas_rejected;
    f.weight_bytes_pulled = st.bytes_pulled;
    f.weight_version_bytes = p.replica.blob.size();
    f.torn_retries = st.torn_retries;
    f.weights_hash = p.replica.hash;
    r.policies.push_back(std::move(f));
  }
  return r;
}

}  // namespace

RolloutReport runRolloutRole(const RolloutPorts& ports) {
  configureThreads(ports.ctx.cfg, ports.ctx.ranks_on_node);
  return RolloutRank(ports).run();
}

}  // namespace astraflow
