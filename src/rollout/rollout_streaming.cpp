// A RaaS rank's per-episode loop on a sequence source — the continuous engine, an http server's
// requests, or the simulated accelerator with batching continuous (docs/rollout-backends.md,
// "Rollout ranks per episode"): the rank holds up to rollout.batch_tasks episodes, starts one as soon as
// a task is there and it has room, and sends each trajectory back as its episode ends. A new
// version (rollout.on_new_version): with `continue` (and `abort`, the same on the engine) it is
// pulled as soon as it is due and the running sequences move to it at the next step, their K/V
// recomputed; with `finish` the rank stops starting episodes, lets the running ones end under
// the version they began with, pulls, and goes on.
#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <unordered_map>

#include "astraflow/rollout/episode_stream.hpp"
#include "rollout/rollout_rank.hpp"

namespace astraflow::rollout_detail {

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// rollout.environment_threads, auto resolved: threads where the environment's work waits on other
// processes or servers, so the engine steps the other episodes meanwhile; the in-process
// environments answer in microseconds and keep to the rank's thread.
int environmentThreads(const Config& cfg) {
  if (cfg.rollout.environment_threads >= 0) return cfg.rollout.environment_threads;
  const EnvironmentOptions& e = cfg.environment;
  const RewardKind k = e.reward.kind;
  const bool waits = e.name == "openenv" || e.name == "code_interpreter" || !e.mcp_servers.empty() ||
                     k == RewardKind::Command || k == RewardKind::Http || k == RewardKind::Code;
  return waits ? 8 : 0;
}

}  // namespace

struct HeldTask {
  Task task;
  bool eval = false;
  double t_start = 0;
  std::size_t policy = 0;  // index into served_
};

// The loop's state and its steps. One "generate" trace event per stretch of work (at most
// `capacity_` training episodes), as a batch was: its span, the policy tokens made and the
// episodes ended in it.
class StreamingLoop {
 public:
  explicit StreamingLoop(RolloutRank& rank);
  void run();

 private:
  bool drained() const { return ended_ && pending_.empty(); }
  // Pulls what is due (any newer version when `force`) and tells the engines.
  void pull(bool force = false);
  void leave();  // the server is lost: tasks go back, the running episodes end
  // Each engine whose policy's version moved learns it: its tokens record it from the next
  // step, and its running sequences (if any) go on under it.
  void tellEngines();
  void take();          // tasks from the ring while there is room
  void startPending();  // starts them in order while their weights are here
  void stepStreams();   // one step of each stream; the episodes that ended go back
  void sendBack(HeldTask h, const Episode& episode);
  void openStretch();
  void closeStretch();

  RolloutRank& rank_;
  const RoleContext& ctx_;
  const bool moves_on_;  // running sequences move to a new version (on_new_version continue | abort)
  std::vector<std::unique_ptr<EpisodeStream>> streams_;  // one per served policy
  const std::size_t capacity_;
  std::unordered_map<std::uint64_t, HeldTask> held_;  // running episodes by tag
  std::deque<Task> pending_;                          // taken from the ring, not started yet
  std::uint64_t next_tag_ = 0;
  bool ended_ = false;
  double idle_since_ = -1;
  double stretch_since_ = -1;
  std::uint64_t stretch_episodes_ = 0, stretch_tokens_ = 0;
};

StreamingLoop::StreamingLoop(RolloutRank& rank)
    : rank_(rank),
      ctx_(rank.ctx_),
      // An http pool's server decides: with update_mode abort its requests in flight resume on
      // the new weights, with finish they must end before the update.
      moves_on_(rank.ports_.backend.http() ? rank.ports_.backend.update_mode == HttpUpdateMode::Abort
                                           : rank.ctx_.cfg.rollout.on_new_version != OnNewVersion::Finish),
      capacity_(static_cast<std::size_t>(rank.ctx_.cfg.rollout.batch_tasks)) {
  for (auto& p : rank_.served_) {
    streams_.push_back(std::make_unique<EpisodeStream>(*p.sequences(), *rank_.tokenizer_, ctx_.cfg.environment,
                                                       p.backend->maxSequenceLength(), environmentThreads(ctx_.cfg)));
  }
}

void StreamingLoop::run() {
  for (;;) {
    rank_.serveRelays();
    rank_.reviveServers();
    if (rank_.serverLost()) {
      leave();
      return;
    }
    if (held_.empty()) {
      closeStretch();
      if (drained()) return;
      pull();
    } else if (moves_on_ && rank_.pullDue()) {
      pull();
    }
    if (held_.empty() || moves_on_ || !rank_.pullDue()) {
      take();
      startPending();
    }
    if (held_.empty()) {
      if (drained()) continue;
      if (idle_since_ < 0) idle_since_ = ctx_.now();
      rank_.idleUntilTaskPoll();
      continue;
    }
    rank_.noteTaskWait(idle_since_);
    stepStreams();
    ctx_.snapshot([this] { return rank_.report(); });
  }
}

void StreamingLoop::leave() {
  // Its server has said nothing for backend.lost_after_seconds (or was given up): the rank
  // leaves, and its end of stream says why. Tasks not started go back; the running episodes'
  // requests fail (one try each, the server being lost) and go back as they end.
  rank_.lost_ = true;
  spdlog::error("rollout rank {}: server {}; leaving the pool", ctx_.rank, rank_.lostServer());
  for (const auto& task : pending_) rank_.giveBack(task);
  pending_.clear();
  while (!held_.empty()) stepStreams();
  closeStretch();
}

void StreamingLoop::pull(bool force) {
  rank_.refreshWeights(force);
  tellEngines();
}

void StreamingLoop::tellEngines() {
  for (auto& p : rank_.served_) {
    auto& sequences = *p.sequences();
    if (sequences.weightVersion() != p.version) sequences.weightsChanged(p.version);
  }
}

void StreamingLoop::take() {
  while (!ended_ && held_.size() + pending_.size() < capacity_) {
    auto task = rank_.popTask(ended_);
    if (!task) return;
    pending_.push_back(std::move(*task));
  }
}

void StreamingLoop::startPending() {
  while (!pending_.empty()) {
    if (rank_.needsNewerVersion(pending_.front())) {
      if (moves_on_) pull(true);
      if (rank_.needsNewerVersion(pending_.front())) {
        if (!held_.empty()) return;  // after the running episodes (finish) or once it is published
        rank_.waitForVersions({pending_.front()});
        tellEngines();
      }
    }
    HeldTask h{std::move(pending_.front()), false, ctx_.now(), 0};
    pending_.pop_front();
    h.eval = h.task.metadata.count(kTaskEvalKey) > 0;
    h.policy = static_cast<std::size_t>(&rank_.served(h.task.policy) - rank_.served_.data());
    const std::uint64_t seed = splitmix(ctx_.cfg.run.seed ^ splitmix(h.task.task_id));
    streams_[h.policy]->start(h.task.problem_id, rank_.samplingFor(h.eval), seed, next_tag_);
    held_.emplace(next_tag_++, std::move(h));
    openStretch();
  }
}

void StreamingLoop::stepStreams() {
  const double t0 = ctx_.now();
  for (auto& stream : streams_) {
    if (stream->active() == 0) continue;
    for (auto& [tag, episode] : stream->step()) {
      auto it = held_.find(tag);
      HeldTask h = std::move(it->second);
      held_.erase(it);
      sendBack(std::move(h), episode);
    }
  }
  rank_.generate_seconds_ += ctx_.now() - t0;
  rank_.stream_counters_ = {};
  for (const auto& stream : streams_) {
    const EpisodeStreamCounters& c = stream->counters();
    rank_.stream_counters_.source_steps += c.source_steps;
    rank_.stream_counters_.source_steps_beside_env += c.source_steps_beside_env;
    rank_.stream_counters_.environment_jobs += c.environment_jobs;
  }
  if (stretch_episodes_ >= capacity_) {
    closeStretch();
    if (!held_.empty()) openStretch();
  }
}

void StreamingLoop::sendBack(HeldTask h, const Episode& episode) {
  rank_.pushTrajectory(rank_.trajectoryOf(h.task, episode, rank_.served_[h.policy], h.t_start, ctx_.now()));
  if (episode.failed) {
    ++rank_.failed_episodes_;
    ++rank_.returned_;
    return;
  }
  ++(h.eval ? rank_.eval_pushed_ : rank_.pushed_);
  if (!h.eval) {
    rank_.reasons_.countRewardReason(episode.reward_reason);
    ++stretch_episodes_;
  }
}

void StreamingLoop::openStretch() {
  if (stretch_since_ >= 0) return;
  stretch_since_ = ctx_.now();
  stretch_episodes_ = 0;
  stretch_tokens_ = rank_.tokens_;
}

void StreamingLoop::closeStretch() {
  if (stretch_since_ < 0) return;
  ctx_.event(TraceKind::Generate, stretch_since_, rank_.served_.front().version, rank_.tokens_ - stretch_tokens_,
             stretch_episodes_);
  stretch_since_ = -1;
}

bool RolloutRank::streams() {
  if (ctx_.cfg.workflow.multiAgent()) return false;
  for (auto& p : served_) {
    if (!p.sequences()) return false;
  }
  return !served_.empty();
}

bool RolloutRank::pullDue() const {
  for (const auto& p : served_) {
    const std::int64_t published = p.store->publishedVersion(), held = p.held.version;
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

void RolloutRank::giveBack(const Task& task) {
  Episode unstarted;
  unstarted.failed = true;
  pushTrajectory(trajectoryOf(task, unstarted, served(task.policy), ctx_.now(), ctx_.now()));
  ++returned_;
}

void RolloutRank::runStreaming() { StreamingLoop(*this).run(); }

}  // namespace astraflow::rollout_detail
