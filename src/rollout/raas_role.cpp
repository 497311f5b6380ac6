// A RaaS rank's loop (ARCHITECTURE §6): take tasks, run the episodes with the engine, return
// trajectories, and refresh weights from the store when a newer version is published. It knows
// nothing of batches, staleness or trainers.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/tokenizer.hpp"
#include "astraflow/trainer/local_loop.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;

class RolloutRank {
 public:
  explicit RolloutRank(RunWiring& w)
      : w_(w),
        pool_(w.role().pool),
        policy_(w.role().policies.front()),
        store_(*w.weight_stores.at(w.policyIndex(policy_))),
        tokenizer_(makeTaskTokenizer()),
        model_(buildPolicyModel(w.cfg, *tokenizer_)),
        engine_(model_, tokenizer_->padId()),
        generator_(at::detail::createCPUGenerator(w.cfg.run.seed * 7919 + 17 + static_cast<std::uint64_t>(w.rank()))) {
    model_->eval();
  }

  RankReport run();

 private:
  bool refreshWeights();
  void waitForVersion(std::int64_t version);
  void runTasks(const std::vector<Task>& tasks, bool eval);
  void pushTrajectory(const Trajectory& t);

  RunWiring& w_;
  int pool_;
  std::string policy_;
  WeightStore& store_;
  std::unique_ptr<Tokenizer> tokenizer_;
  PolicyModel model_;
  GenerationEngine engine_;
  at::Generator generator_;
  std::int64_t version_ = -1;
  std::vector<std::byte> blob_, record_;
  // Report.
  std::uint64_t pushed_ = 0, eval_pushed_ = 0, oversize_ = 0, malformed_ = 0, tokens_ = 0, pulls_ = 0;
  double generate_seconds_ = 0, wait_seconds_ = 0, pull_seconds_ = 0;
};

bool RolloutRank::refreshWeights() {
  if (store_.publishedVersion() <= version_) return false;
  const double t = w_.now();
  const std::int64_t v = store_.pull(blob_);
  if (v <= version_) return false;
  unpackWeights(blob_, *model_);
  version_ = v;
  ++pulls_;
  pull_seconds_ += w_.now() - t;
  w_.event("weight_pull", t, v, blob_.size(), 1);
  return true;
}

void RolloutRank::waitForVersion(std::int64_t version) {
  Backoff backoff(2000us);
  while (version_ < version) {
    if (!refreshWeights()) backoff.wait();
  }
}

void RolloutRank::pushTrajectory(const Trajectory& t) {
  encodeInto(t, record_);
  auto& ring = *w_.trajectory_rings[pool_];
  try {
    ring.push(record_);
  } catch (const RecordTooLarge&) {
    // Too large for the trajectory ring: refused, counted here, and reported to the dataflow
    // rank as an error-status stand-in so the group completes and the loss is on the books.
    if (oversize_++ < 5) {
      spdlog::warn("trajectory of task {} takes {} bytes, more than dataflow.trajectory_ring holds ({}); sent as an "
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

void RolloutRank::runTasks(const std::vector<Task>& tasks, bool eval) {
  if (tasks.empty()) return;
  std::int64_t needed = 0;
  for (const auto& t : tasks) {
    if (auto it = t.metadata.find(kTaskMinVersionKey); it != t.metadata.end()) {
      needed = std::max<std::int64_t>(needed, std::stoll(it->second));
    }
  }
  waitForVersion(needed);
  SamplingOptions sampling = samplingFrom(w_.cfg);
  sampling.greedy = eval;
  std::vector<std::uint64_t> problems;
  problems.reserve(tasks.size());
  for (const auto& t : tasks) problems.push_back(t.problem_id);
  const double t_start = w_.now();
  const auto episodes = runEpisodes(engine_, *tokenizer_, w_.cfg.environment, problems, sampling, generator_);
  const double t_end = w_.now();
  generate_seconds_ += t_end - t_start;
  std::uint64_t tokens = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& task = tasks[i];
    const Episode& e = episodes[i];
    Trajectory t;
    t.task_id = task.task_id;
    t.problem_id = task.problem_id;
    t.group_id = task.group_id;
    t.group_index = task.group_index;
    t.policy = task.policy;
    t.producer_rank = w_.rank();
    t.pool_uid = static_cast<std::uint32_t>(pool_);
    t.weight_version_min = t.weight_version_max = version_;
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
    for (auto m : e.policy_mask) tokens += m;
    pushTrajectory(t);
    ++(eval ? eval_pushed_ : pushed_);
  }
  tokens_ += tokens;
  w_.event(eval ? "eval_generate" : "generate", t_start, version_, tokens, tasks.size());
}

RankReport RolloutRank::run() {
  auto& tasks_ring = *w_.task_rings[pool_];
  Backoff idle(2000us);
  bool ended = false;
  std::vector<Task> train, eval;
  const std::size_t batch = static_cast<std::size_t>(w_.cfg.rollout.batch_tasks);
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
      if (idle_since < 0) idle_since = w_.now();
      idle.wait();
      continue;
    }
    if (idle_since >= 0) {
      w_.event("task_wait", idle_since, version_);
      wait_seconds_ += w_.now() - idle_since;
      idle_since = -1;
    }
    idle.reset();
    runTasks(eval, true);
    runTasks(train, false);
  }
  // The last record of this rank: the dataflow rank counts one per rollout rank before it stops.
  Trajectory end;
  end.task_id = kEndOfStreamBatchId;
  end.policy = policy_;
  end.producer_rank = w_.rank();
  encodeInto(end, record_);
  w_.trajectory_rings[pool_]->push(record_);

  RankReport r;
  r["pushed"] = static_cast<double>(pushed_);
  r["eval_pushed"] = static_cast<double>(eval_pushed_);
  r["oversize"] = static_cast<double>(oversize_);
  r["malformed_tasks"] = static_cast<double>(malformed_);
  r["generated_tokens"] = static_cast<double>(tokens_);
  r["generate_seconds"] = generate_seconds_;
  r["task_wait_seconds"] = wait_seconds_;
  r["weight_pulls"] = static_cast<double>(pulls_);
  r["weight_pull_seconds"] = pull_seconds_;
  r["torn_retries"] = static_cast<double>(store_.stats().torn_retries);
  r["final_version"] = static_cast<double>(version_);
  return r;
}

}  // namespace

RankReport runRolloutRole(RunWiring& w) {
  configureThreads(w.cfg, w.ranks_on_node);
  return RolloutRank(w).run();
}

}  // namespace astraflow
