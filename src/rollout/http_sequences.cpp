// An http pool rank's requests one by one (docs/rollout-backends.md, "Rollout ranks per episode").
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "astraflow/rollout/generation_backend.hpp"

namespace astraflow {

struct HttpSequences::Impl {
  HttpBackend& backend;
  std::chrono::milliseconds wait;
  mutable std::mutex mutex;
  std::condition_variable work, answered;
  std::deque<std::pair<SequenceId, SequenceRequest>> queued;
  std::vector<FinishedSequence> done;
  std::size_t outstanding = 0;  // submitted, not yet handed back
  bool stopping = false;
  SequenceId next_id = 1;
  std::vector<std::thread> workers;

  Impl(HttpBackend& b, std::chrono::milliseconds w) : backend(b), wait(w) {}

  // Worker k sends on client k (1 … max_in_flight): one request at a time, its answer checked
  // and retried by the backend, then handed to the rank's thread.
  void serve(std::size_t client) {
    for (;;) {
      std::pair<SequenceId, SequenceRequest> next;
      {
        std::unique_lock lock(mutex);
        work.wait(lock, [&] { return stopping || !queued.empty(); });
        if (queued.empty()) return;  // stopping, with nothing left to send
        next = std::move(queued.front());
        queued.pop_front();
      }
      auto& [id, request] = next;
      Generation g = backend.request(client, request.prompt, request.options);
      if (request.on_token) {
        // The server answers whole: the caller sees the tokens in order and may end it early.
        for (std::size_t t = 0; t < g.tokens.size(); ++t) {
          if (!request.on_token(g.tokens[t], g.logprobs[t])) {
            g.tokens.resize(t + 1);
            g.logprobs.resize(t + 1);
            if (g.token_versions.size() > t + 1) g.token_versions.resize(t + 1);
            g.ended_by_caller = g.stopped = true;
            break;
          }
        }
      }
      std::lock_guard lock(mutex);
      done.push_back({id, std::move(g)});
      answered.notify_one();
    }
  }
};

HttpSequences::HttpSequences(HttpBackend& backend, std::chrono::milliseconds wait)
    : impl_(std::make_unique<Impl>(backend, wait)) {
  const auto width = static_cast<std::size_t>(backend.maxInFlight());
  for (std::size_t k = 1; k <= width; ++k) impl_->workers.emplace_back([this, k] { impl_->serve(k); });
}

HttpSequences::~HttpSequences() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    impl_->queued.clear();  // not sent: nobody waits for them any more
  }
  impl_->work.notify_all();
  for (auto& t : impl_->workers) t.join();
}

SequenceId HttpSequences::submit(SequenceRequest request) {
  std::lock_guard lock(impl_->mutex);
  // With nothing in flight no worker reads the model id: it may be learned now.
  if (impl_->outstanding == 0) impl_->backend.learnModel();
  const SequenceId id = impl_->next_id++;
  impl_->queued.emplace_back(id, std::move(request));
  ++impl_->outstanding;
  impl_->work.notify_one();
  return id;
}

std::vector<FinishedSequence> HttpSequences::step() {
  std::unique_lock lock(impl_->mutex);
  if (impl_->outstanding > 0) impl_->answered.wait_for(lock, impl_->wait, [&] { return !impl_->done.empty(); });
  std::vector<FinishedSequence> out = std::move(impl_->done);
  impl_->done.clear();
  impl_->outstanding -= out.size();
  return out;
}

bool HttpSequences::idle() const { return outstanding() == 0; }

std::size_t HttpSequences::outstanding() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->outstanding;
}

}  // namespace astraflow
