// EpisodeStream: episodes run one by one on a SequenceSource, each turn submitted as soon as the environment has
// answered the last (its K/V kept for the next), and handed back with their tags as they end; the environment's
// work on threads of its own when the stream has them, so the source steps the other episodes meanwhile.
#include "astraflow/rollout/episode_stream.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace astraflow {

struct EpisodeStream::Running {
  std::uint64_t tag = 0;
  std::unique_ptr<Environment> env;
  Episode episode;
  SamplingOptions options;
  std::uint64_t seed = 0;
  std::size_t max_len = 0;
  SequenceId last_turn = 0;  // its turn before this one: its K/V kept for this one to extend
  // Set by the environment's work, read on the caller's thread once it is collected.
  bool starting = false;   // the work is its reset (else its answer to a turn)
  bool turn_done = false;  // the environment ended the episode at that turn
  std::exception_ptr error;
};

// Threads that run environment work, one job per episode at a time (an episode's job touches only
// its own Running), and hand the episodes back in the order their jobs end.
class EpisodeStream::EnvironmentWork {
 public:
  explicit EnvironmentWork(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { serve(); });
  }
  ~EnvironmentWork() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;  // jobs not begun are dropped: their episodes go with the stream
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  EnvironmentWork(const EnvironmentWork&) = delete;
  EnvironmentWork& operator=(const EnvironmentWork&) = delete;

  void post(Running* r, std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.emplace_back(r, std::move(job));
    }
    work_cv_.notify_one();
  }

  std::vector<Running*> finished(int wait_ms) {
    std::unique_lock lock(mutex_);
    if (done_.empty() && wait_ms > 0)
      done_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return !done_.empty(); });
    return std::exchange(done_, {});
  }

 private:
  void serve() {
    for (;;) {
      std::pair<Running*, std::function<void()>> job;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      try {
        job.second();
      } catch (...) {
        job.first->error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        done_.push_back(job.first);
      }
      done_cv_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<Running*, std::function<void()>>> jobs_;
  std::vector<Running*> done_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

namespace {
// How long step() waits for the environment when no sequence runs: an answer wakes it at once;
// the bound only lets the caller look at its ring and weights now and then.
constexpr int kEnvironmentWaitMs = 10;
}  // namespace

EpisodeStream::EpisodeStream(SequenceSource& source, const Tokenizer& tokenizer, const EnvironmentOptions& environment,
                             int max_sequence_length, int environment_threads)
    : source_(source),
      tokenizer_(tokenizer),
      environment_(environment),
      max_sequence_length_(max_sequence_length),
      work_(environment_threads > 0 ? std::make_unique<EnvironmentWork>(environment_threads) : nullptr) {}

EpisodeStream::~EpisodeStream() { work_.reset(); }  // the threads first: their jobs use the episodes

void EpisodeStream::resetEpisode(Running& r, std::uint64_t problem_id) const {
  r.episode = startEpisode(tokenizer_, *r.env, problem_id);
  r.options.stop_token_ids = stopIds(tokenizer_, *r.env);
  r.max_len = episodeContextLimit(max_sequence_length_, *r.env);
}

void EpisodeStream::start(std::uint64_t problem_id, const SamplingOptions& sampling, std::uint64_t seed,
                          std::uint64_t tag) {
  auto r = std::make_unique<Running>();
  r->tag = tag;
  r->env = makeEnvironment(environment_);
  r->options = sampling;
  r->seed = seed;
  if (!work_) {
    resetEpisode(*r, problem_id);
    submitTurn(*r.release());
    return;
  }
  Running* raw = r.get();
  raw->starting = true;
  in_environment_.emplace(raw, std::move(r));
  ++counters_.environment_jobs;
  work_->post(raw, [this, raw, problem_id] { resetEpisode(*raw, problem_id); });
}

void EpisodeStream::submitTurn(Running& r) {
  SequenceRequest request;
  request.prompt = r.episode.tokens;
  request.options = r.options;
  // A fresh stream per turn, fixed by the episode's seed and the turn's number.
  request.seed = r.seed ^ (0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(r.episode.turns) + 1));
  // The next turn (if one can follow) appends to this one's blocks instead of prefilling the
  // history again.
  request.keep_kv = r.episode.turns + 1 < r.env->maxTurns();
  request.continues = r.last_turn;
  r.last_turn = source_.submit(std::move(request));
  by_sequence_[r.last_turn].reset(&r);
}

void EpisodeStream::afterTurn(std::unique_ptr<Running> r, std::vector<std::pair<std::uint64_t, Episode>>& ended) {
  if (!r->turn_done && r->episode.turns < r->env->maxTurns()) {
    submitTurn(*r.release());
    return;
  }
  if (!r->turn_done) r->episode.truncated = true;  // out of turns
  source_.release(r->last_turn);                   // no turn continues it
  ended.emplace_back(r->tag, std::move(r->episode));
}

void EpisodeStream::collect(int wait_ms, std::vector<std::pair<std::uint64_t, Episode>>& ended) {
  if (!work_ || in_environment_.empty()) return;
  for (Running* raw : work_->finished(wait_ms)) {
    auto it = in_environment_.find(raw);
    std::unique_ptr<Running> r = std::move(it->second);
    in_environment_.erase(it);
    if (r->error) std::rethrow_exception(r->error);
    if (r->starting) {
      r->starting = false;
      submitTurn(*r.release());
    } else {
      afterTurn(std::move(r), ended);
    }
  }
}

std::vector<std::pair<std::uint64_t, Episode>> EpisodeStream::step() {
  std::vector<std::pair<std::uint64_t, Episode>> ended;
  collect(by_sequence_.empty() ? kEnvironmentWaitMs : 0, ended);
  if (by_sequence_.empty()) return ended;
  ++counters_.source_steps;
  if (!in_environment_.empty()) ++counters_.source_steps_beside_env;
  for (auto& f : source_.step()) {
    auto it = by_sequence_.find(f.id);
    if (it == by_sequence_.end()) continue;  // another user's sequence on a shared scheduler
    std::unique_ptr<Running> r = std::move(it->second);
    by_sequence_.erase(it);
    if (!work_) {
      r->turn_done = applyTurn(r->episode, *r->env, f.generation, tokenizer_, r->options.stop_token_ids, r->max_len);
      afterTurn(std::move(r), ended);
      continue;
    }
    Running* raw = r.get();
    in_environment_.emplace(raw, std::move(r));
    ++counters_.environment_jobs;
    work_->post(raw, [this, raw, generation = std::move(f.generation)] {
      raw->turn_done =
          applyTurn(raw->episode, *raw->env, generation, tokenizer_, raw->options.stop_token_ids, raw->max_len);
    });
  }
  return ended;
}

}  // namespace astraflow
