// A RaaS rank's per-episode loop on the continuous engine (docs/rollout-backends.md, "Rollout
// ranks per episode"): the rank holds up to rollout.batch_tasks episodes, starts one as soon as
// a task is there and it has room, and sends each trajectory back as its episode ends. Weights
// change only while no sequence runs: when a pull is due the rank stops starting episodes, lets
// the running ones end under the version they began with, pulls, and goes on.
#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <unordered_map>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/rollout/episode_stream.hpp"
#include "rollout/rollout_rank.hpp"

namespace astraflow::rollout_detail {

using namespace std::chrono_literals;

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct HeldTask {
  Task task;
  bool eval = false;
  double t_start = 0;
  std::size_t policy = 0;  // index into served_
};

}  // namespace

bool RolloutRank::streams() const {
  if (ctx_.cfg.workflow.multiAgent()) return false;
  for (const auto& p : served_) {
    if (!p.engine) return false;
  }
  return !served_.empty();
}

bool RolloutRank::pullDue() const {
  for (const auto& p : served_) {
    const std::int64_t published = p.store->publishedVersion(), held = p.replica.version;
    if (published > held && (held < 0 || published - held >= ctx_.cfg.weights.pull_every)) return true;
  }
  return false;
}

bool RolloutRank::needsNewerVersion(const Task& task) const {
  std::int64_t needed = 0;  // some weights, at least: never a task on the untrained init
  if (auto it = task.metadata.find(kTaskMinVersionKey); it != task.metadata.end()) needed = std::stoll(it->second);
  for (const auto& p : served_) {
    if (p.name == task.policy) return p.version < needed;
  }
  return false;
}

void RolloutRank::runStreaming() {
  std::vector<std::unique_ptr<EpisodeStream>> streams;
  for (auto& p : served_) {
    streams.push_back(std::make_unique<EpisodeStream>(p.engine->scheduler(), *tokenizer_, ctx_.cfg.environment,
                                                      p.model->config().max_seq_len));
  }
  const std::size_t capacity = static_cast<std::size_t>(ctx_.cfg.rollout.batch_tasks);
  std::unordered_map<std::uint64_t, HeldTask> held;
  std::deque<Task> pending;  // taken from the ring, not started yet
  std::uint64_t next_tag = 0;
  Backoff idle(2000us);
  bool ended = false;
  double idle_since = -1;
  // One "generate" trace event per stretch of work (at most `capacity` training episodes), as a
  // batch was: its span, the policy tokens made and the episodes ended in it.
  double stretch_since = -1;
  std::uint64_t stretch_episodes = 0, stretch_tokens = 0;
  auto closeStretch = [&] {
    if (stretch_since < 0) return;
    ctx_.event("generate", stretch_since, served_.front().version, tokens_ - stretch_tokens, stretch_episodes);
    stretch_since = -1;
  };
  for (;;) {
    if (held.empty()) {
      closeStretch();
      if (ended && pending.empty()) break;
      refreshWeights();  // between sequences: no running sequence ever changes weights
    }
    const bool draining = !held.empty() && pullDue();
    while (!draining && !ended && held.size() + pending.size() < capacity) {
      auto task = popTask(ended);
      if (!task) break;
      pending.push_back(std::move(*task));
    }
    while (!draining && !pending.empty()) {
      if (needsNewerVersion(pending.front())) {
        if (!held.empty()) break;  // after the running episodes, with the pull
        waitForVersions({pending.front()});
      }
      HeldTask h{std::move(pending.front()), false, ctx_.now(), 0};
      pending.pop_front();
      h.eval = h.task.metadata.count(kTaskEvalKey) > 0;
      h.policy = static_cast<std::size_t>(&served(h.task.policy) - served_.data());
      const std::uint64_t seed = splitmix(ctx_.cfg.run.seed ^ splitmix(h.task.task_id));
      streams[h.policy]->start(h.task.problem_id, samplingFor(h.eval), seed, next_tag);
      held.emplace(next_tag++, std::move(h));
      if (stretch_since < 0) {
        stretch_since = ctx_.now();
        stretch_episodes = 0;
        stretch_tokens = tokens_;
      }
    }
    if (held.empty()) {
      if (ended && pending.empty()) continue;
      if (idle_since < 0) idle_since = ctx_.now();
      idle.wait();
      continue;
    }
    noteTaskWait(idle_since);
    idle.reset();
    const double t0 = ctx_.now();
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (streams[i]->active() == 0) continue;
      for (auto& [tag, episode] : streams[i]->step()) {
        auto it = held.find(tag);
        HeldTask h = std::move(it->second);
        held.erase(it);
        pushTrajectory(trajectoryOf(h.task, episode, served_[h.policy], h.t_start, ctx_.now()));
        if (episode.failed) {
          ++returned_;
          continue;
        }
        ++(h.eval ? eval_pushed_ : pushed_);
        if (!h.eval) {
          reasons_.countRewardReason(episode.reward_reason);
          ++stretch_episodes;
        }
      }
    }
    generate_seconds_ += ctx_.now() - t0;
    if (stretch_episodes >= capacity) {
      closeStretch();
      if (!held.empty()) {
        stretch_since = ctx_.now();
        stretch_episodes = 0;
        stretch_tokens = tokens_;
      }
    }
  }
}

}  // namespace astraflow::rollout_detail
