// environment.openenv.server_per: node — the ranks of a node share one OpenEnv server (the
// example written with openenv-core): the first starts it, the others adopt it through the node's
// folder and locks (node_share.hpp), the starter stops it only once the others are done, and a
// server that dies is replaced once for the node. Two servers' worth of ranks are two
// OpenEnvServer objects here (each holds its own locks, as two processes would) and a real
// second process, `astraflow env check`.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "astraflow/core/config.hpp"
#include "astraflow/http/http.hpp"
#include "astraflow/tasks/environment.hpp"
#include "tasks/openenv_fixture.hpp"
#include "tasks/openenv_server.hpp"

namespace openenv_tests {
namespace {

using detail::OpenEnvServer;

bool answers(const OpenEnvServer& s) {
  std::string url = s.sessionEndpoint().url;  // ws://host:port/ws
  url = "http://" + url.substr(5, url.size() - 5 - 3);
  return HttpClient(url, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000)).get("/health").ok();
}

std::size_t serverLogs(const std::string& log_dir) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(log_dir)) n += e.path().extension() == ".log";
  return n;
}

// The node's folder goes under the test's own temporary folder (TMPDIR), restored afterwards;
// the server runs from a copy of the example, so its processes are this test's alone.
struct NodeGame : Fixture {
  std::string script;
  std::string saved_tmpdir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "";
  NodeGame() : Fixture("ASTRAFLOW_OPENENV_EXAMPLE", {"--port", "{port}"}) {
    script = dir.file("guess_server.py");
    std::filesystem::copy_file(options.openenv.command.at(1), script);
    options.openenv.command.at(1) = script;
    options.openenv.server_per = OpenEnvServerScope::Node;
    ::setenv("TMPDIR", dir.path().c_str(), 1);
  }
  ~NodeGame() {
    if (saved_tmpdir.empty())
      ::unsetenv("TMPDIR");
    else
      ::setenv("TMPDIR", saved_tmpdir.c_str(), 1);
  }
};

}  // namespace

TEST(OpenEnvNode, TheNodesRanksShareOneServerAndItsStarterWaitsForTheOthers) {
  NodeGame g;
  auto starter = std::make_unique<OpenEnvServer>(g.options.openenv);
  auto other = std::make_unique<OpenEnvServer>(g.options.openenv);
  EXPECT_EQ(other->sessionEndpoint().url, starter->sessionEndpoint().url);
  EXPECT_EQ(other->sessionEndpoint().generation, 0);
  EXPECT_EQ(childrenRunning(g.script).size(), 1U);
  EXPECT_EQ(serverLogs(g.options.openenv.log_dir), 1U);

  // The starter goes first: it keeps the server until the other is done with it.
  auto stopped = std::async(std::launch::async, [&] { starter.reset(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(600)), std::future_status::timeout);
  EXPECT_TRUE(answers(*other));
  other.reset();
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(childrenRunning(g.script).empty());

  // A rank that comes later finds no server (the starter withdrew it) and starts the next one.
  OpenEnvServer later(g.options.openenv);
  EXPECT_TRUE(answers(later));
  EXPECT_EQ(later.sessionEndpoint().generation, 0);
  EXPECT_EQ(serverLogs(g.options.openenv.log_dir), 2U);
}

TEST(OpenEnvNode, ADeadServerIsReplacedOnceForTheNode) {
  NodeGame g;
  auto starter = std::make_unique<OpenEnvServer>(g.options.openenv);
  auto other = std::make_unique<OpenEnvServer>(g.options.openenv);
  const auto first = starter->sessionEndpoint();
  const auto pids = childrenRunning(g.script);
  ASSERT_EQ(pids.size(), 1U);
  ::kill(pids[0], SIGKILL);

  // The rank that did not start it sees /health fail and starts the next one; the starter, whose
  // process has ended, takes that one instead of starting a third.
  EXPECT_TRUE(other->reviveIfDead(first.generation, std::chrono::milliseconds(100)));
  EXPECT_EQ(other->sessionEndpoint().generation, 1);
  EXPECT_NE(other->sessionEndpoint().url, first.url);
  EXPECT_TRUE(starter->reviveIfDead(first.generation, std::chrono::seconds(5)));
  EXPECT_EQ(starter->sessionEndpoint().url, other->sessionEndpoint().url);
  EXPECT_EQ(starter->sessionEndpoint().generation, 1);
  EXPECT_FALSE(starter->reviveIfDead(first.generation, std::chrono::milliseconds(0))) << "replaced already";
  EXPECT_FALSE(other->reviveIfDead(1, std::chrono::milliseconds(0))) << "the new one answers";
  EXPECT_EQ(other->counters().restarts.load(), 1U);
  EXPECT_EQ(starter->counters().restarts.load(), 0U);
  EXPECT_EQ(childrenRunning(g.script).size(), 1U);
  EXPECT_EQ(serverLogs(g.options.openenv.log_dir), 2U);
  // `other` started the server now serving: it stops it once `starter` has gone.
  starter.reset();
  other.reset();
  EXPECT_TRUE(childrenRunning(g.script).empty());
}

TEST(OpenEnvNode, AnotherProcessPlaysItsEpisodesOnTheNodesServer) {
  NodeGame g;
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "ASTRAFLOW_CLI is not set";
  ASSERT_EQ(std::system((std::string(cli) + " init-model " + g.dir.file("m") +
                         " --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 --intermediate-size 32 "
                         "--max-positions 512 > /dev/null")
                            .c_str()),
            0);
  const std::string config = g.dir.file("node.yaml");
  std::ofstream(config) << "run: {output_dir: " << g.dir.file("run") << "}\n"
                        << "policies: [{name: p, model: {hf: " << g.dir.file("m") << "}}]\n"
                        << "layout: [{role: dataflow, ranks: 1}, {role: trainer, policy: p, ranks: 1}, "
                           "{role: rollout, policies: [p], ranks: 2}]\n"
                        << "environment:\n  name: openenv\n  max_turns: 3\n  openenv:\n"
                        << "    command: [" << g.options.openenv.command[0] << ", " << g.script
                        << ", --port, \"{port}\"]\n    server_per: node\n    observation_field: prompt\n"
                        << "    log_dir: " << g.dir.file("logs") << "\n";
  const Config cfg = loadConfig(config);
  ASSERT_EQ(cfg.environment.openenv.server_per, OpenEnvServerScope::Node);
  auto env = makeEnvironment(cfg.environment);
  EXPECT_NE(env->reset(3).find("from 1 to 16"), std::string::npos);  // this process starts the server

  const std::string out = g.dir.file("check.out");
  const int rc = std::system((std::string(cli) + " env check " + config + " --episodes 2 > " + out + " 2>&1").c_str());
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("using the node's server"), std::string::npos) << text;
  EXPECT_NE(text.find("OpenEnv: 2 sessions,"), std::string::npos) << text;
  EXPECT_NE(text.find(" 0 failed"), std::string::npos) << text;
  EXPECT_EQ(serverLogs(g.dir.file("logs")), 1U);  // no second server
  EXPECT_FALSE(env->step("no number").done);      // and this process's session still plays
}

}  // namespace openenv_tests
