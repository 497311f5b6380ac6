#include "serve/generation_queue.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "astraflow/model/device.hpp"
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

namespace {

// Requests batch together when they sample the same way; their token limits may differ.
bool sameSampling(const SamplingOptions& a, const SamplingOptions& b) {
  return a.greedy == b.greedy && (a.greedy || (a.temperature == b.temperature && a.top_p == b.top_p)) &&
         a.min_new_tokens == b.min_new_tokens && a.stop_token_ids == b.stop_token_ids &&
         a.banned_token_ids == b.banned_token_ids;
}

}  // namespace

GenerationQueue::GenerationQueue(GenerationEngine engine, int max_batch, std::chrono::microseconds batch_wait,
                                 std::uint64_t seed, std::string weight_version)
    : engine_(std::move(engine)),
      config_(engine_.model()->config()),
      max_batch_(std::max(1, max_batch)),
      batch_wait_(batch_wait),
      generator_(makeGenerator(engine_.model()->device(), seed)),
      weight_version_(std::move(weight_version)) {
  worker_ = std::thread([this] { work(); });
}

GenerationQueue::~GenerationQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
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
  std::vector<Pending> batch;
  for (;;) {
    std::optional<Update> update;
    {
      std::unique_lock lock(mutex_);
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
      if (stopping_) return;
      if (updates_.empty() && static_cast<int>(pending_.size()) < max_batch_ && batch_wait_.count() > 0) {
        // Requests sent together arrive a few hundred microseconds apart: wait a moment for them.
        wake_.wait_for(lock, batch_wait_, [&] {
          return stopping_ || !updates_.empty() || static_cast<int>(pending_.size()) >= max_batch_;
        });
        if (stopping_) return;
      }
      if (updates_.empty() && paused_) continue;
      if (!updates_.empty()) {
        // Updates go first: requests that arrive after one was asked for see the new weights.
        update.emplace(std::move(updates_.front()));
        updates_.pop_front();
      } else {
        // The oldest request and every waiting one that samples as it does, oldest first.
        batch.clear();
        const SamplingOptions key = pending_.front().request.sampling;
        for (auto it = pending_.begin(); it != pending_.end() && static_cast<int>(batch.size()) < max_batch_;) {
          abort_running_ = false;  // under the lock pause() takes: an abort asked from now on cuts this batch
          if (sameSampling(it->request.sampling, key)) {
            batch.push_back(std::move(*it));
            it = pending_.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    if (update) {
      std::string error;
      try {
        loadHfWeights(*engine_.model(), update->folder);
      } catch (const std::exception& e) {
        error = e.what();
      }
      {
        std::lock_guard lock(mutex_);
        if (error.empty()) {
          weight_version_ = update->version;
          ++stats_.weight_updates;
        }
      }
      if (!error.empty()) spdlog::warn("weight update from {} refused: {}", update->folder.string(), error);
      update->promise.set_value(error);
      continue;
    }
    runBatch(batch);
  }
}

void GenerationQueue::runBatch(std::vector<Pending>& batch) {
  std::vector<std::vector<std::int32_t>> prompts;
  RowControl control;
  SamplingOptions options = batch.front().request.sampling;
  int longest_limit = 0;
  for (const auto& p : batch) {
    prompts.push_back(p.request.prompt);
    control.max_new_tokens.push_back(p.request.sampling.max_new_tokens);
    longest_limit = std::max(longest_limit, p.request.sampling.max_new_tokens);
  }
  options.max_new_tokens = longest_limit;
  control.on_token = [this, &batch](std::size_t row, std::int32_t token, float logprob) {
    if (abort_running_) return false;
    const auto& hook = batch[row].request.on_token;
    return !hook || hook(token, logprob);
  };
  std::vector<Generation> out;
  std::string failure;
  try {
    out = engine_.generate(prompts, options, generator_, control);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  std::string version;
  std::uint64_t tokens = 0;
  {
    std::lock_guard lock(mutex_);
    version = weight_version_;
  }
  if (!failure.empty()) spdlog::error("a batch of {} requests failed: {}", batch.size(), failure);
  const bool aborted = abort_running_.exchange(false);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    QueuedResult r;
    r.weight_version = version;
    if (failure.empty()) {
      Generation& g = out[i];
      tokens += g.tokens.size();
      r.tokens = std::move(g.tokens);
      r.logprobs = std::move(g.logprobs);
      r.nonfinite = g.nonfinite;
      r.matched_stop_token = g.stopped && !g.ended_by_caller;
      r.finish = g.nonfinite ? Finish::Abort : g.stopped ? Finish::Stop : Finish::Length;
      if (aborted && g.ended_by_caller) r.finish = Finish::Abort;  // cut by pause(abort), not by a stop
    } else {
      r.finish = Finish::Abort;
    }
    if (batch[i].request.on_done) batch[i].request.on_done(r);
    batch[i].promise.set_value(std::move(r));
  }
  std::lock_guard lock(mutex_);
  ++stats_.batches;
  stats_.rows += batch.size();
  stats_.generated_tokens += tokens;
  stats_.largest_batch = std::max<std::uint64_t>(stats_.largest_batch, batch.size());
  if (aborted) stats_.aborted += batch.size();
}

void GenerationQueue::pause(bool abort) {
  std::lock_guard lock(mutex_);
  paused_ = true;
  if (abort) abort_running_ = true;
}

void GenerationQueue::resume() {
  {
    std::lock_guard lock(mutex_);
    paused_ = false;
  }
  wake_.notify_all();
}

}  // namespace astraflow::serve_detail
