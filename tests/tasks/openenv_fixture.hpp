#pragma once
// The OpenEnv tests' servers and players (test_openenv.cpp, test_openenv_demonstrations.cpp):
// the example written with openenv-core (examples/openenv_guess/server.py), a server that
// misbehaves on purpose (openenv_faulty_server.py) and the MCP-style twin
// (examples/openenv_tools/server.py), each started by the environment itself (command).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"
#include "tasks/process_watch.hpp"

namespace openenv_tests {

using namespace astraflow;

struct Fixture {
  test::TempDir dir;
  EnvironmentOptions options;

  // The server `script_variable` names, started as `python script <port arguments>`.
  Fixture(const char* script_variable, std::vector<std::string> port_arguments) {
    const char* python = std::getenv("ASTRAFLOW_PYTHON");
    const char* script = std::getenv(script_variable);
    if (python == nullptr || script == nullptr) throw std::runtime_error("run under ctest (ASTRAFLOW_PYTHON)");
    std::filesystem::create_directories(dir.file("model"));
    writeByteLevelTokenizer(dir.file("model"));
    options.name = "openenv";
    options.max_turns = 5;
    options.dataset.tokenizer_folders = {dir.file("model")};
    options.openenv.command = {python, script};
    for (auto& a : port_arguments) options.openenv.command.push_back(std::move(a));
    options.openenv.log_dir = dir.file("logs");
    options.openenv.start_seconds = 120;
    options.openenv.timeout_seconds = 30;
  }
};

inline Fixture guessGame() { return Fixture("ASTRAFLOW_OPENENV_EXAMPLE", {"--port", "{port}"}); }
inline Fixture faultyServer() { return Fixture("ASTRAFLOW_OPENENV_FAULTY", {"{port}"}); }
// The MCP-style game (interface: mcp) with Qwen3's chat template, which shows tools in the prompt.
struct ToolsGame : Fixture {
  ToolsGame() : Fixture("ASTRAFLOW_OPENENV_TOOLS_EXAMPLE", {"--port", "{port}"}) {
    const char* qwen3 = std::getenv("ASTRAFLOW_QWEN3_CONFIG");
    if (qwen3 == nullptr) throw std::runtime_error("run under ctest (ASTRAFLOW_QWEN3_CONFIG)");
    std::filesystem::copy_file(qwen3, dir.file("model") + "/tokenizer_config.json",
                               std::filesystem::copy_options::overwrite_existing);
    options.dataset.enable_thinking = "false";
    options.openenv.interface = OpenEnvInterface::Mcp;
    options.openenv.observation_field = "prompt";
    options.openenv.reset_json = R"({"turns": 5})";
  }
};

inline std::string guessCall(int number) {
  return "<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": " + std::to_string(number) +
         "}}\n</tool_call>";
}

// The direct children of this process running `script` (another test may run the same one).
inline std::vector<int> childrenRunning(const std::string& script) {
  std::vector<int> pids;
  for (const int pid : test::processesWith(script)) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string id, comm, state;
    int parent = 0;
    stat >> id >> comm >> state >> parent;
    if (parent == ::getpid() && state != "Z") pids.push_back(pid);
  }
  return pids;
}

// Binary search on every game at once, one turn of each in turn: a session that saw another's
// game would answer hints for the wrong number and miss. Returns the number each episode found.
inline std::vector<int> playAll(std::vector<std::unique_ptr<Environment>>& envs,
                                const std::vector<std::uint64_t>& seeds) {
  const std::size_t n = envs.size();
  std::vector<int> low(n, 1), high(n, 16), found(n, 0);
  std::vector<bool> done(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string prompt = envs[i]->reset(seeds[i]);
    EXPECT_NE(prompt.find("from 1 to 16. You have 5 guesses"), std::string::npos) << prompt;
  }
  for (int turn = 0; turn < 5; ++turn) {
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      const int guess = (low[i] + high[i]) / 2;
      const StepResult s = envs[i]->step("My guess is " + std::to_string(guess) + ".");
      if (s.done) {
        done[i] = true;
        EXPECT_EQ(s.reason, "correct") << "seed " << seeds[i] << " guess " << guess;
        EXPECT_EQ(s.reward, 1.0);
        found[i] = guess;
      } else if (s.observation.find("Higher.") != std::string::npos) {
        low[i] = guess + 1;
      } else {
        EXPECT_NE(s.observation.find("Lower."), std::string::npos) << s.observation;
        high[i] = guess - 1;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(done[i]) << "seed " << seeds[i];
  return found;
}

}  // namespace openenv_tests
