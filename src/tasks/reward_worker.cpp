// The persistent command reward and the http reward (include/astraflow/tasks/reward_worker.hpp).
#include "astraflow/tasks/reward_worker.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <tuple>

#include "astraflow/core/error.hpp"
#include "astraflow/http/http.hpp"
#include "astraflow/tasks/command_reward.hpp"
#include "astraflow/tasks/process_runner.hpp"
#include "tasks/line_process.hpp"
#include "tasks/process_registry.hpp"

namespace astraflow {

RewardWorkerCounters& RewardWorkerCounters::operator+=(const RewardWorkerCounters& o) {
  items += o.items, started += o.started, restarts += o.restarts;
  crashed += o.crashed, timeouts += o.timeouts, invalid += o.invalid;
  return *this;
}

namespace {}  // namespace

namespace detail {

// Free slots (indices) handed out one at a time; a taker waits while none is free.
class SlotQueue {
 public:
  explicit SlotQueue(int n) {
    for (int i = 0; i < n; ++i) free_.push_back(i);
  }
  int take() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return !free_.empty(); });
    const int i = free_.back();
    free_.pop_back();
    return i;
  }
  void give(int i) {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(i);
    }
    ready_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int> free_;
};

// Gives its slot back however the scoring ends.
struct SlotLease {
  SlotQueue& queue;
  int index;
  ~SlotLease() { queue.give(index); }
};

}  // namespace detail

using detail::SlotLease;
using detail::SlotQueue;

struct RewardWorkerPool::Slot {
  std::unique_ptr<detail::LineProcess> process;
  std::uint64_t items = 0;  // answered by this process
  bool ever_started = false;
};

struct RewardWorkerPool::State {
  std::vector<Slot> slots;
  SlotQueue queue;
  RewardWorkerCounters counters;
  explicit State(int n) : slots(static_cast<std::size_t>(n)), queue(n) {}
};

RewardWorkerPool::RewardWorkerPool(RewardWorkerOptions options) : options_(std::move(options)) {
  if (options_.argv.empty()) throw Error("the persistent command reward has no command to run");
  if (options_.workers < 1) throw Error("the persistent command reward needs at least one worker");
  if (!(options_.timeout_seconds > 0)) throw Error("the persistent command reward's timeout must be positive");
  executable_ = detail::findExecutable(options_.argv.front());
  state_ = std::make_unique<State>(options_.workers);
}

RewardWorkerPool::~RewardWorkerPool() = default;

RewardWorkerCounters RewardWorkerPool::counters() const {
  std::lock_guard lock(mutex_);
  return state_->counters;
}

RewardResult RewardWorkerPool::score(const std::string& input_json) {
  const SlotLease lease{state_->queue, state_->queue.take()};
  const RewardResult r = scoreOn(state_->slots[static_cast<std::size_t>(lease.index)], input_json);
  std::lock_guard lock(mutex_);
  ++state_->counters.items;
  if (r.reason == RewardReason::Invalid) ++state_->counters.invalid;
  return r;
}

RewardResult RewardWorkerPool::scoreOn(Slot& slot, const std::string& input_json) {
  using Outcome = detail::LineProcess::Outcome;
  auto count = [&](std::uint64_t RewardWorkerCounters::*field) {
    std::lock_guard lock(mutex_);
    ++(state_->counters.*field);
  };
  for (int attempt = 0;; ++attempt) {
    if (slot.process && slot.process->ended()) slot.process.reset();
    if (!slot.process) {
      detail::ProcessSpec spec;
      spec.executable = executable_;
      spec.argv = options_.argv;
      spec.env = detail::lineProcessEnvironment();
      try {
        slot.process = std::make_unique<detail::LineProcess>(spec);
      } catch (const Error& e) {
        // The first start failing is a configuration error; a restart failing (no pipe, no
        // process left) costs this item, not the rank.
        if (!slot.ever_started) throw;
        count(&RewardWorkerCounters::crashed);
        spdlog::warn("reward worker {} could not be started again: {}", options_.argv.front(), e.what());
        return {0.0, RewardReason::Crashed, ""};
      }
      slot.items = 0;
      count(&RewardWorkerCounters::started);
      if (slot.ever_started) count(&RewardWorkerCounters::restarts);
      slot.ever_started = true;
    }
    const auto answer = slot.process->exchange(input_json, options_.timeout_seconds, kCommandAnswerBytes);
    if (answer.outcome == Outcome::Answered) {
      if (options_.max_items > 0 && ++slot.items >= options_.max_items) slot.process.reset();
      return commandVerdict(answer.line);
    }
    const std::string tail = slot.process->stderrTail();
    slot.process.reset();  // killed with its group and reaped: it is not used again
    if (answer.outcome == Outcome::TimedOut) {
      count(&RewardWorkerCounters::timeouts);
      return {0.0, RewardReason::Timeout, ""};
    }
    if (answer.outcome == Outcome::TooLong) return {0.0, RewardReason::Invalid, ""};
    count(&RewardWorkerCounters::crashed);
    // The first ten ends are logged, then one in a hundred: a verifier that dies on every item
    // must not flood the rank's log (the counters have them all).
    const std::uint64_t ends = counters().crashed;
    if (ends <= 10 || ends % 100 == 0)
      spdlog::warn("reward worker {} ended before answering{}; {}", options_.argv.front(),
                   tail.empty()
                       ? ""
                       : fmt::format(" (its stderr ends: {})", tail.substr(tail.size() > 400 ? tail.size() - 400 : 0)),
                   attempt == 0 ? "the item goes to a fresh worker" : "the item is scored `crashed`");
    if (ends == 10) spdlog::warn("reward worker {}: further ends are logged one in 100", options_.argv.front());
    if (attempt > 0) return {0.0, RewardReason::Crashed, ""};
  }
}

namespace {

using WorkerKey = std::tuple<std::vector<std::string>, int, double, std::uint64_t>;
using HttpKey = std::tuple<std::string, int, double>;
detail::ProcessRegistry<WorkerKey, RewardWorkerPool>& workerPools() {
  static detail::ProcessRegistry<WorkerKey, RewardWorkerPool> pools;
  return pools;
}
detail::ProcessRegistry<HttpKey, HttpRewardPool>& httpPools() {
  static detail::ProcessRegistry<HttpKey, HttpRewardPool> pools;
  return pools;
}

}  // namespace

std::shared_ptr<RewardWorkerPool> sharedRewardWorkerPool(const RewardWorkerOptions& o) {
  return workerPools().get({o.argv, o.workers, o.timeout_seconds, o.max_items},
                           [&] { return std::make_shared<RewardWorkerPool>(o); });
}

RewardWorkerCounters sharedRewardWorkerCounters() {
  RewardWorkerCounters sum;
  workerPools().forEach([&](const RewardWorkerPool& pool) { sum += pool.counters(); });
  httpPools().forEach([&](const HttpRewardPool& pool) { sum += pool.counters(); });
  return sum;
}

// ---- http ----

struct HttpRewardPool::State {
  std::string base, path;
  std::vector<std::unique_ptr<HttpClient>> clients;
  SlotQueue queue;
  std::mutex mutex;
  RewardWorkerCounters counters;
  explicit State(int n) : clients(static_cast<std::size_t>(n)), queue(n) {}
};

HttpRewardPool::HttpRewardPool(HttpRewardOptions options) : options_(std::move(options)) {
  const std::string& url = options_.url;
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0 || url.size() == scheme.size())
    throw Error(fmt::format("environment.reward.url '{}' is not http://host[:port][/path]", url));
  if (options_.workers < 1) throw Error("the http reward needs at least one worker");
  if (!(options_.timeout_seconds > 0)) throw Error("the http reward's timeout must be positive");
  state_ = std::make_unique<State>(options_.workers);
  const auto slash = url.find('/', scheme.size());
  state_->base = url.substr(0, slash);
  state_->path = slash == std::string::npos ? "/" : url.substr(slash);
}

HttpRewardPool::~HttpRewardPool() = default;

RewardWorkerCounters HttpRewardPool::counters() const {
  std::lock_guard lock(state_->mutex);
  return state_->counters;
}

RewardResult HttpRewardPool::score(const std::string& input_json) {
  const SlotLease lease{state_->queue, state_->queue.take()};
  auto& client = state_->clients[static_cast<std::size_t>(lease.index)];
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options_.timeout_seconds * 1000));
  bool fresh = false;
  if (!client) {
    client = std::make_unique<HttpClient>(state_->base, timeout, timeout);
    fresh = true;
  }
  const auto start = std::chrono::steady_clock::now();
  const HttpResult answer = client->postJson(state_->path, input_json);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RewardResult r{0.0, RewardReason::Crashed, ""};
  if (!answer.transportOk()) {
    client.reset();  // a broken or timed-out connection is opened anew
    if (took >= options_.timeout_seconds * 0.99) r.reason = RewardReason::Timeout;
  } else if (answer.ok()) {
    r = answer.body.size() > kCommandAnswerBytes ? RewardResult{0.0, RewardReason::Invalid, ""}
                                                 : commandVerdict(answer.body);
  }
  std::lock_guard lock(state_->mutex);
  auto& c = state_->counters;
  ++c.items;
  c.started += fresh ? 1 : 0;
  c.timeouts += r.reason == RewardReason::Timeout ? 1 : 0;
  c.crashed += r.reason == RewardReason::Crashed ? 1 : 0;
  c.invalid += r.reason == RewardReason::Invalid ? 1 : 0;
  return r;
}

std::shared_ptr<HttpRewardPool> sharedHttpRewardPool(const HttpRewardOptions& o) {
  return httpPools().get({o.url, o.workers, o.timeout_seconds}, [&] { return std::make_shared<HttpRewardPool>(o); });
}

}  // namespace astraflow
