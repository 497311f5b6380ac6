// GenerationQueue: the worker thread of `astraflow serve` that steps the continuous scheduler, taking requests in at
// each step and finishing them as they end; a weight update waits until the running requests are done.
#include "serve/generation_queue.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "astraflow/model/hf_weights.hpp"

namespace astraflow::serve_detail {

const char* finishName(Finish f) {
  switch (f) {
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Abort: return "abort";
  }
  return "abort";
}

GenerationQueue::GenerationQueue(GenerationEngine engine, int max_batch, std::chrono::microseconds batch_wait,
                                 std::uint64_t seed, std::string weight_version)
    : engine_(std::move(engine)),
      config_(engine_.model()->config()),
      max_batch_(std::max(1, max_batch)),
      batch_wait_(batch_wait),
      seeds_(seed),
      weight_version_(std::move(weight_version)) {
  worker_ = std::thread([this] { work(); });
}

GenerationQueue::~GenerationQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();  // the running requests end first
  // Nothing left waits forever: the requests still queued end aborted, with no tokens.
  for (auto& p : pending_) {
    QueuedResult r;
    r.finish = Finish::Abort;
    r.weight_version = weight_version_;
    if (p.request.on_done) p.request.on_done(r);
    p.promise.set_value(std::move(r));
  }
  for (auto& u : updates_) u.promise.set_value("the server is shutting down");
}

std::future<QueuedResult> GenerationQueue::submit(QueuedRequest request) {
  Pending p{std::move(request), {}};
  auto future = p.promise.get_future();
  {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    pending_.push_back(std::move(p));
  }
  wake_.notify_one();
  return future;
}

std::string GenerationQueue::updateWeights(const std::filesystem::path& folder, const std::string& weight_version) {
  Update u{folder, weight_version, {}};
  auto future = u.promise.get_future();
  {
    std::lock_guard lock(mutex_);
    updates_.push_back(std::move(u));
  }
  wake_.notify_one();
  return future.get();
}

std::string GenerationQueue::weightVersion() const {
  std::lock_guard lock(mutex_);
  return weight_version_;
}

QueueStats GenerationQueue::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void GenerationQueue::work() {
  for (;;) {
    std::optional<Update> update;
    std::vector<Pending> starting;
    {
      std::unique_lock lock(mutex_);
      if (!next(lock, update, starting)) return;
    }
    if (update) {
      applyUpdate(*update);
      continue;
    }
    for (auto& p : starting) start(std::move(p));
    if (!running_.empty()) step();
  }
}

bool GenerationQueue::next(std::unique_lock<std::mutex>& lock, std::optional<Update>& update,
                           std::vector<Pending>& starting) {
  if (running_.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (pending_.empty() && updates_.empty() && !stopping_ && now - last_trim_ > std::chrono::seconds(1)) {
      last_trim_ = now;
      // Idle: give back what the last burst's requests left in malloc's free lists (the HTTP
      // threads' arenas hold their parsed bodies and answers), so a server that has seen a
      // burst returns to its size instead of keeping its peak for hours.
      lock.unlock();
      malloc_trim(0);
      lock.lock();
    }
    wake_.wait(lock, [&] { return stopping_ || !updates_.empty() || (!paused_ && !pending_.empty()); });
    if (stopping_) return false;
    if (updates_.empty() && !paused_ && static_cast<int>(pending_.size()) < max_batch_ && batch_wait_.count() > 0) {
      // Requests sent together arrive a few hundred microseconds apart: wait a moment for them.
      wake_.wait_for(lock, batch_wait_,
                     [&] { return stopping_ || !updates_.empty() || static_cast<int>(pending_.size()) >= max_batch_; });
      if (stopping_) return false;
    }
    if (!updates_.empty()) {
      // Updates go first: requests that arrive after one was asked for see the new weights.
      update.emplace(std::move(updates_.front()));
      updates_.pop_front();
      return true;
    }
  }
  // A waiting update holds new requests back until the running ones have ended.
  if (!updates_.empty() || paused_) return true;
  while (!pending_.empty() && static_cast<int>(running_.size() + starting.size()) < max_batch_) {
    starting.push_back(std::move(pending_.front()));
    pending_.pop_front();
    starting.back().abort_epoch = abort_epoch_;
  }
  return true;
}

void GenerationQueue::applyUpdate(Update& update) {
  std::string error;
  try {
    loadHfWeights(*engine_.model(), update.folder);
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    std::lock_guard lock(mutex_);
    if (error.empty()) {
      weight_version_ = update.version;
      ++stats_.weight_updates;
    }
  }
  if (!error.empty()) spdlog::warn("weight update from {} refused: {}", update.folder.string(), error);
  update.promise.set_value(error);
}

// Joins the running requests at the next step, drawing from its own generator.
void GenerationQueue::start(Pending pending) {
  auto p = std::make_unique<Pending>(std::move(pending));
  SequenceRequest r;
  r.prompt = p->request.prompt;
  r.options = p->request.sampling;
  r.seed = seeds_();
  Pending* self = p.get();
  r.on_token = [this, self](std::int32_t token, float logprob) {
    if (abort_epoch_ != self->abort_epoch) {
      self->cut = true;
      return false;
    }
    const auto& hook = self->request.on_token;
    return !hook || hook(token, logprob);
  };
  running_.emplace(engine_.scheduler().submit(std::move(r)), std::move(p));
}

void GenerationQueue::step() {
  std::vector<FinishedSequence> done;
  const std::size_t stepped = running_.size();
  try {
    done = engine_.scheduler().step();
  } catch (const std::exception& e) {
    // The step failed as a whole (the engine threw): every running request ends aborted; the
    // scheduler is made afresh, so nothing of theirs is left in it.
    spdlog::error("a step over {} requests failed: {}", running_.size(), e.what());
    for (auto& [id, p] : running_) {
      Generation g;
      g.nonfinite = true;
      finish(*p, g);
    }
    running_.clear();
    engine_.resetScheduler();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.rows += stepped;
    stats_.most_running = std::max<std::uint64_t>(stats_.most_running, stepped);
  }
  for (auto& f : done) {
    auto it = running_.find(f.id);
    if (it == running_.end()) continue;
    finish(*it->second, f.generation);
    running_.erase(it);
  }
}

void GenerationQueue::finish(Pending& p, Generation& g) {
  QueuedResult r;
  {
    std::lock_guard lock(mutex_);
    r.weight_version = weight_version_;
    stats_.generated_tokens += g.tokens.size();
    if (p.cut) ++stats_.aborted;
  }
  r.tokens = std::move(g.tokens);
  r.logprobs = std::move(g.logprobs);
  r.nonfinite = g.nonfinite;
  r.matched_stop_token = g.stopped && !g.ended_by_caller;
  r.finish = g.nonfinite || p.cut ? Finish::Abort : g.stopped ? Finish::Stop : Finish::Length;
  if (p.request.on_done) p.request.on_done(r);
  p.promise.set_value(std::move(r));
}

void GenerationQueue::pause(bool abort) {
  std::lock_guard lock(mutex_);
  paused_ = true;
  if (abort) ++abort_epoch_;
}

void GenerationQueue::resume() {
  {
    std::lock_guard lock(mutex_);
    paused_ = false;
  }
  wake_.notify_all();
}

}  // namespace astraflow::serve_detail
