// The http backend against a real `astraflow serve` with backend.update_mode abort
// (docs/rollout-backends.md, "Generation across versions"): a long request in flight when the
// server is paused with mode abort for another rank's weight update comes back aborted with the tokens it made;
// the backend keeps them and resumes from them, so the row ends as one answer of its full length,
// its first tokens tagged with the old version and the rest with the new one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "astraflow/core/config.hpp"
#include "astraflow/http/http.hpp"
#include "astraflow/rollout/generation_backend.hpp"

using namespace astraflow;
namespace fs = std::filesystem;

namespace {

struct Server {
  fs::path dir;
  std::string url;
  long pid = 0;

  explicit Server(const std::string& cli)
      : dir(fs::temp_directory_path() / ("astraflow_resume_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& [name, seed] : {std::pair{"a", 3}, std::pair{"b", 4}}) {
      const std::string cmd = cli + " init-model " + (dir / name).string() + " --preset tiny-qwen3 --seed " +
                              std::to_string(seed) + " > /dev/null";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("init-model failed");
    }
    const std::string serve = cli + " serve " + (dir / "a").string() + " --port 0 --port-file " +
                              (dir / "port").string() + " > " + (dir / "serve.log").string() + " 2>&1 & echo $! > " +
                              (dir / "pid").string();
    if (std::system(serve.c_str()) != 0) throw std::runtime_error("serve did not start");
    std::ifstream(dir / "pid") >> pid;
    for (int i = 0; i < 600 && (!fs::exists(dir / "port") || fs::file_size(dir / "port") == 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::string port;
    std::ifstream(dir / "port") >> port;
    if (port.empty()) throw std::runtime_error("serve wrote no port");
    url = "http://127.0.0.1:" + port;
  }
  ~Server() {
    if (pid > 0) std::system(("kill " + std::to_string(pid) + " 2>/dev/null").c_str());
    fs::remove_all(dir);
  }
};

RolloutBackendSpec httpSpec(const Server& server) {
  RolloutBackendSpec spec;
  spec.kind = BackendKind::Http;
  spec.urls = {server.url};
  return spec;
}

const char* cliPath() {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  if (cli == nullptr) ADD_FAILURE() << "ASTRAFLOW_CLI is not set (run under ctest)";
  return cli;
}

}  // namespace

TEST(HttpBackend, AnAbortedRequestResumesFromTheTokensItMade) {
  const char* cli = cliPath();
  ASSERT_NE(cli, nullptr);
  Server server(cli);
  RolloutBackendSpec spec = httpSpec(server);
  spec.update_mode = HttpUpdateMode::Abort;
  spec.timeout_seconds = 120;
  // Two ranks' backends on one server, as in a pool: one generates, the other updates the weights
  // (its pause aborts the first one's request in flight).
  HttpBackend backend(spec, 0, 4096), updater(spec, 1, 4096);

  SamplingOptions o;
  o.temperature = 1.0;
  o.max_new_tokens = o.min_new_tokens = 2000;  // no stop before the limit: long enough to be cut
  std::vector<Generation> out;
  std::thread row([&] { out = backend.generate({{1, 2, 3, 4, 5}}, o); });
  // Paused once the server has the request (seconds of generation left on the tiny model).
  HttpClient info(server.url, std::chrono::seconds(5), std::chrono::seconds(30));
  for (int i = 0; i < 2000; ++i) {
    const auto r = info.get("/get_server_info");
    if (r.ok() && nlohmann::json::parse(r.body).value("requests", 0) >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(updater.loadWeights((server.dir / "b").string(), 7));
  row.join();

  ASSERT_EQ(out.size(), 1u);
  const Generation& g = out[0];
  ASSERT_FALSE(g.failed);
  const auto& st = backend.stats();
  EXPECT_EQ(st.failed, 0u);
  ASSERT_GE(st.resumed, 1u) << "nothing was aborted: " << g.tokens.size() << " tokens, " << st.requests << " requests, "
                            << st.http_errors << " http errors, " << st.retries << " retries";
  EXPECT_EQ(g.tokens.size(), 2000u) << "the resumed request made what was left, not the whole limit again";
  ASSERT_EQ(g.logprobs.size(), g.tokens.size());
  ASSERT_EQ(g.token_versions.size(), g.tokens.size());
  // The kept tokens are the old version's, the rest the new one's.
  const auto old_tokens = static_cast<std::size_t>(st.resumed_tokens);
  ASSERT_GT(old_tokens, 0u);
  ASSERT_LT(old_tokens, g.tokens.size());
  for (std::size_t k = 0; k < g.tokens.size(); ++k) {
    if (k < old_tokens) {
      EXPECT_NE(g.token_versions[k], 7) << "token " << k;
    } else {
      EXPECT_EQ(g.token_versions[k], 7) << "token " << k;
    }
  }
  EXPECT_EQ(g.weight_version, 7);
}

// Per episode (docs/rollout-backends.md, "Rollout ranks per episode"): an http rank's requests go
// out one by one as they are submitted, up to backend.max_in_flight at once; a short one comes
// back while a long one is still in flight; and the server sees max_in_flight of them running
// together, never more.
TEST(HttpSequences, KeepMaxInFlightRequestsAndAShortOneNeverWaitsForALongOne) {
  const char* cli = cliPath();
  ASSERT_NE(cli, nullptr);
  Server server(cli);
  RolloutBackendSpec spec = httpSpec(server);
  spec.max_in_flight = 4;
  HttpBackend backend(spec, 0, 4096);
  HttpSequences sequences(backend);
  auto request = [](int tokens) {
    SequenceRequest r;
    r.prompt = {1, 2, 3, 4, 5};
    r.options.temperature = 1.0;
    r.options.max_new_tokens = r.options.min_new_tokens = tokens;
    return r;
  };
  const SequenceId long_one = sequences.submit(request(1500));
  std::vector<SequenceId> shorts;
  for (int i = 0; i < 12; ++i) shorts.push_back(sequences.submit(request(3)));
  std::vector<SequenceId> order;
  std::map<SequenceId, Generation> done;
  while (!sequences.idle()) {
    for (auto& f : sequences.step()) {
      order.push_back(f.id);
      done[f.id] = std::move(f.generation);
    }
  }
  ASSERT_EQ(done.size(), 13u);
  EXPECT_EQ(order.back(), long_one) << "the short requests came back while the long one ran";
  EXPECT_EQ(done[long_one].tokens.size(), 1500u);
  for (const auto id : shorts) {
    EXPECT_FALSE(done[id].failed);
    EXPECT_EQ(done[id].tokens.size(), 3u);
  }

  // Eight long ones on four connections: the server ran four together at most, no more.
  for (int i = 0; i < 8; ++i) sequences.submit(request(200));
  std::size_t answered = 0;
  while (!sequences.idle()) answered += sequences.step().size();
  EXPECT_EQ(answered, 8u);
  HttpClient info(server.url, std::chrono::seconds(5), std::chrono::seconds(30));
  const auto r = info.get("/get_server_info");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(nlohmann::json::parse(r.body).at("most_running").get<int>(), 4);
  EXPECT_EQ(backend.stats().requests, 21u);
  EXPECT_EQ(backend.stats().failed, 0u);
}

// A transcript that fills the policy's context (a team's rounds, a long multi-turn episode) gets
// an empty answer, as the engine gives, not a request the server refuses (HTTP 400): a refusal
// fails the episode, and its task, re-issued, would be refused again for ever. A prompt with a
// little room asks for no more than that room.
TEST(HttpBackend, APromptThatFillsTheContextGetsNothingAndNoRequest) {
  const char* cli = cliPath();
  ASSERT_NE(cli, nullptr);
  Server server(cli);
  std::ifstream config(server.dir / "a" / "config.json");
  const int context = nlohmann::json::parse(config).at("max_position_embeddings").get<int>();
  HttpBackend backend(httpSpec(server), 0, context);
  SamplingOptions o;
  o.max_new_tokens = o.min_new_tokens = 50;
  const std::vector<std::int32_t> full(static_cast<std::size_t>(context), 5);
  const std::vector<std::int32_t> two_left(static_cast<std::size_t>(context - 2), 5);
  const auto out = backend.generate({full, two_left}, o);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[0].failed);
  EXPECT_TRUE(out[0].tokens.empty());
  EXPECT_FALSE(out[0].stopped);
  EXPECT_FALSE(out[1].failed);
  EXPECT_EQ(out[1].tokens.size(), 2u);
  EXPECT_EQ(backend.stats().requests, 1u);
  EXPECT_EQ(backend.stats().http_errors, 0u);
  EXPECT_EQ(backend.stats().failed, 0u);
}
