// Rewards from programs that stay running (tasks/reward_worker.hpp): a persistent verifier written
// here against the same verifier run per item (commandReward), on generated inputs up to 100k
// characters; a worker that crashes every N items, hangs, answers garbage or past the 1 MiB limit;
// max_items restarts; several threads on one pool; the http reward against a server in this
// process, its failures, and a server that is not there.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/http/http.hpp"
#include "astraflow/tasks/command_reward.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "astraflow/tasks/reward_worker.hpp"
#include "io/temp_dir.hpp"
#include "tasks/process_watch.hpp"

using namespace astraflow;

namespace reward_worker_tests {

// Reads one object per line (per item: the one object it is given) and answers a line each. A
// response naming a behaviour gets it; argv[2], when given, is N: the process exits without
// answering the N-th object it reads.
const char* kWorker = R"(import json, os, re, sys, time
crash_every = int(sys.argv[2]) if len(sys.argv) > 2 else 0
seen = 0
for line in sys.stdin:
    seen += 1
    if crash_every and seen == crash_every:
        os._exit(1)
    task = json.loads(line)
    r = task["response"]
    if r == "HANG":
        time.sleep(1000)
    if r == "GARBAGE":
        print("reward: one")
        continue
    if r == "HUGE":
        sys.stdout.write("x" * (2 << 20))
        sys.stdout.flush()
        time.sleep(1000)
    if r == "HUGE_LINE":
        print('{"reward": 1, "answer": "' + "x" * (2 << 20) + '"}', flush=True)
        continue
    if r == "DIE":
        os._exit(3)
    numbers = re.findall(r"-?\d+", r)
    ok = bool(numbers) and numbers[-1] == task["reference"]
    reason = "no_answer" if not numbers else ("correct" if ok else "wrong")
    print(json.dumps({"reward": 1.0 if ok else 0.0, "reason": reason,
                      "answer": task["metadata"].get("id", "") + ":" + str(len(r))}))
)";

std::string inputOf(const std::string& response, const std::string& reference, const std::string& id) {
  const nlohmann::json j = {
      {"prompt", "What is it?"}, {"response", response}, {"reference", reference}, {"metadata", {{"id", id}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Responses as a policy writes them: numbers in text, newlines, quotes, backslashes, non-ASCII,
// now and then 100k characters.
std::vector<std::string> generatedInputs(int n) {
  std::mt19937 rng(17);
  const std::vector<std::string> words = {"the", "answer", "is", "\"quoted\"", "back\\slash", "λx.x", "日本",
                                          "\n",  "\t",     "{",  "}",          "emoji 🙂",  "=",    "\\boxed{"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string r;
    const int count = i % 50 == 7 ? 20000 : static_cast<int>(rng() % 40);
    for (int w = 0; w < count; ++w) r += words[rng() % words.size()] + " ";
    if (rng() % 4 != 0) r += std::to_string(rng() % 20);
    out.push_back(inputOf(r, std::to_string(rng() % 20), fmt::format("q{}", i)));
  }
  return out;
}

class RewardWorker : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir.file("worker.py")) << kWorker; }
  RewardWorkerOptions options(int crash_every = 0) {
    RewardWorkerOptions o;
    o.argv = {"python3", dir.file("worker.py"), "score"};
    if (crash_every > 0) o.argv.push_back(std::to_string(crash_every));
    o.timeout_seconds = 20;
    return o;
  }
  test::TempDir dir;
};

void expectSame(const RewardResult& a, const RewardResult& b, std::size_t i) {
  EXPECT_EQ(a.reward, b.reward) << "item " << i;
  EXPECT_EQ(a.reason, b.reason) << "item " << i;
  EXPECT_EQ(a.answer, b.answer) << "item " << i;
}

TEST_F(RewardWorker, GivesThePerItemRewardsAndSurvivesAWorkerThatCrashesEvery100Items) {
  const test::HostSnapshot host;
  const auto inputs = generatedInputs(250);
  std::vector<RewardResult> per_item;
  CommandRewardOptions once{options().argv, 20};
  for (std::size_t i = 0; i < 40; ++i) per_item.push_back(commandReward(inputs[i], once));  // ~40 ms each
  {
    RewardWorkerPool steady(options());
    for (std::size_t i = 0; i < 40; ++i) expectSame(steady.score(inputs[i]), per_item[i], i);
    EXPECT_EQ(steady.counters().started, 1U);
    EXPECT_EQ(steady.counters().restarts, 0U);
  }
  // The whole set through a steady worker and through one that ends at every 100th line: the
  // item it died on is sent to a fresh worker, so the rewards are the same.
  {
    RewardWorkerPool steady(options());
    RewardWorkerPool crashing(options(100));
    std::size_t correct = 0, wrong = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const RewardResult want = steady.score(inputs[i]);
      expectSame(crashing.score(inputs[i]), want, i);
      correct += want.reason == RewardReason::Correct, wrong += want.reason == RewardReason::Wrong;
    }
    EXPECT_GT(correct, 0U);
    EXPECT_GT(wrong, 0U);
    // Lines 100, 199 (its 100th after the restart's first) ...: every 99 items after the first.
    const auto c = crashing.counters();
    EXPECT_EQ(c.items, 250U);
    EXPECT_EQ(c.crashed, 2U);
    EXPECT_EQ(c.restarts, 2U);
    EXPECT_EQ(c.started, 3U);
    EXPECT_EQ(steady.counters().started, 1U);
  }
  host.expectUnchanged();  // the pools' workers killed and reaped with them
}

TEST_F(RewardWorker, FailuresAreRewardsWithReasonsAndTheNextItemGetsAFreshWorker) {
  const test::HostSnapshot host;
  RewardWorkerOptions o = options();
  o.timeout_seconds = 3;  // Python's start-up included: the restarts happen under load too
  {
    RewardWorkerPool pool(o);
    const std::string good = inputOf("so 7", "7", "g");
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(pool.score(inputOf("HANG", "7", "h")).reason, RewardReason::Timeout);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);
    EXPECT_EQ(pool.score(inputOf("GARBAGE", "7", "x")).reason, RewardReason::Invalid);
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);  // garbage answered in line: same worker
    EXPECT_EQ(pool.score(inputOf("HUGE", "7", "x")).reason, RewardReason::Invalid);
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);
    // A whole answer line past 1 MiB is no answer either (the per-item command's limit).
    EXPECT_EQ(pool.score(inputOf("HUGE_LINE", "7", "x")).reason, RewardReason::Invalid);
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);
    // A response its worker dies on twice (the fresh worker too) is `crashed`; the next item is fine.
    EXPECT_EQ(pool.score(inputOf("DIE", "7", "d")).reason, RewardReason::Crashed);
    EXPECT_EQ(pool.score(good).reason, RewardReason::Correct);
    const auto c = pool.counters();
    EXPECT_EQ(c.items, 11U);
    EXPECT_EQ(c.timeouts, 1U);
    EXPECT_EQ(c.invalid, 3U);
    EXPECT_EQ(c.crashed, 2U);
    // Started: the first, after the hang, after each huge answer, two for the dying item.
    EXPECT_EQ(c.started, 6U);
    EXPECT_EQ(c.restarts, 5U);
  }
  host.expectUnchanged();

  RewardWorkerOptions missing = options();
  missing.argv = {"/no/such/verifier"};
  EXPECT_THROW(RewardWorkerPool{missing}, Error);
}

TEST_F(RewardWorker, MaxItemsStartsItAgainAndThreadsShareAPool) {
  RewardWorkerOptions o = options();
  o.max_items = 10;
  o.workers = 3;
  RewardWorkerPool pool(o);
  const auto inputs = generatedInputs(60);
  RewardWorkerPool reference(options());
  std::vector<RewardResult> want;
  for (const auto& in : inputs) want.push_back(reference.score(in));
  std::vector<RewardResult> got(inputs.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (std::size_t i; (i = next++) < inputs.size();) got[i] = pool.score(inputs[i]);
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < inputs.size(); ++i) expectSame(got[i], want[i], i);
  const auto c = pool.counters();
  EXPECT_EQ(c.items, 60U);
  EXPECT_EQ(c.crashed, 0U);
  // Each of the 3 slots starts a worker for every 10 items it takes (at least one each).
  EXPECT_GE(c.started, 6U);
  EXPECT_GE(c.restarts, 3U);
}

// A worker is started by whichever thread first needs it and then serves the others: it must not
// die when that thread ends (the spawn's PR_SET_PDEATHSIG follows the thread that clones it).
TEST_F(RewardWorker, AWorkerOutlivesTheThreadThatStartedIt) {
  RewardWorkerPool pool(options());
  const auto inputs = generatedInputs(2);
  std::thread([&] { (void)pool.score(inputs[0]); }).join();     // starts the only worker, then ends
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // time for a death signal to land
  RewardWorkerPool reference(options());
  expectSame(pool.score(inputs[1]), reference.score(inputs[1]), 1);
  const auto c = pool.counters();
  EXPECT_EQ(c.crashed, 0U);
  EXPECT_EQ(c.started, 1U);  // the same worker answered both
  EXPECT_EQ(c.restarts, 0U);
}

TEST(HttpReward, ScoresThroughTheServiceAndCountsItsFailures) {
  HttpServer server(4, HttpServerLimits{});
  std::atomic<int> calls{0};
  server.post("/reward", [&](const HttpRequest& req, HttpResponse& res) {
    ++calls;
    const auto task = nlohmann::json::parse(req.body);
    const std::string r = task["response"];
    if (r == "ERROR") {
      res.status = 500;
      res.body = "{}";
    } else if (r == "SLOW") {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      res.body = R"({"reward": 1})";
    } else if (r == "GARBAGE") {
      res.body = "<html>";
    } else {
      const bool ok = r == task["reference"];
      res.body = nlohmann::json{{"reward", ok ? 1.0 : 0.0}, {"answer", r}}.dump();
    }
  });
  const int port = server.bind("127.0.0.1", 0);
  server.start();
  HttpRewardPool pool({fmt::format("http://127.0.0.1:{}/reward", port), 2, 0.5});
  RewardResult r = pool.score(inputOf("42", "42", "a"));
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, RewardReason::Correct);
  EXPECT_EQ(r.answer, "42");
  EXPECT_EQ(pool.score(inputOf("41", "42", "a")).reason, RewardReason::Wrong);
  EXPECT_EQ(pool.score(inputOf("ERROR", "42", "a")).reason, RewardReason::Crashed);
  EXPECT_EQ(pool.score(inputOf("GARBAGE", "42", "a")).reason, RewardReason::Invalid);
  EXPECT_EQ(pool.score(inputOf("SLOW", "42", "a")).reason, RewardReason::Timeout);
  EXPECT_EQ(pool.score(inputOf("42", "42", "a")).reason, RewardReason::Correct);  // a fresh connection
  EXPECT_EQ(calls.load(), 6);
  const auto c = pool.counters();
  EXPECT_EQ(c.items, 6U);
  EXPECT_EQ(c.crashed, 1U);
  EXPECT_EQ(c.invalid, 1U);
  EXPECT_EQ(c.timeouts, 1U);
  server.stop();
  // No server there: crashed, promptly, never a throw.
  EXPECT_EQ(pool.score(inputOf("42", "42", "a")).reason, RewardReason::Crashed);
  EXPECT_THROW(HttpRewardPool({"ftp://x/y", 1, 1}), Error);
}

}  // namespace reward_worker_tests
