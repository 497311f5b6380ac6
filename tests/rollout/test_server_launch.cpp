// backend.launch (docs/rollout-backends.md, "Servers the pool starts"): the arguments and
// environment of a start — placeholders replaced, and the flags each api needs added only where
// the user's command neither gives them nor places their value itself.
#include <gtest/gtest.h>

#include <algorithm>

#include "rollout/server_launch.hpp"

using namespace astraflow;
using rollout_detail::launchArguments;
using rollout_detail::launchEnvironment;

namespace {

RolloutBackendSpec launching(HttpApi api, std::vector<std::string> command) {
  RolloutBackendSpec spec;
  spec.kind = BackendKind::Http;
  spec.api = api;
  spec.launch.command = std::move(command);
  return spec;
}

// The value after `flag`, or "" when it is not there.
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

}  // namespace

TEST(ServerLaunch, VllmGetsTheFlagsItsBackendNeedsUnlessTheCommandGivesThem) {
  auto argv = launchArguments(
      launching(HttpApi::Vllm, {"python3", "-m", "vllm.entrypoints.openai.api_server", "--dtype", "float32"}), 4321,
      "/w/solver/v3", 1);
  EXPECT_EQ(after(argv, "--model"), "/w/solver/v3");
  EXPECT_EQ(after(argv, "--port"), "4321");
  EXPECT_EQ(after(argv, "--host"), "127.0.0.1");
  EXPECT_EQ(after(argv, "--logprobs-mode"), "processed_logprobs");
  EXPECT_EQ(after(argv, "--dtype"), "float32");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--enable-prompt-tokens-details"), argv.end());
  // Given by the user (either spelling), or placed by a placeholder: not added again.
  argv = launchArguments(launching(HttpApi::Vllm, {"vllm-server", "{model}", "--logprobs-mode=processed_logprobs",
                                                   "--port", "{port}", "--host", "0.0.0.0"}),
                         4321, "/w/v3", 0);
  EXPECT_EQ(argv, (std::vector<std::string>{"vllm-server", "/w/v3", "--logprobs-mode=processed_logprobs", "--port",
                                            "4321", "--host", "0.0.0.0", "--enable-prompt-tokens-details"}));
  const auto env = launchEnvironment(launching(HttpApi::Vllm, {"x"}), 0);
  EXPECT_NE(std::find(env.begin(), env.end(), std::pair<std::string, std::string>{"VLLM_SERVER_DEV_MODE", "1"}),
            env.end());
}

TEST(ServerLaunch, SglangAndOpenaiAndTheLocalRank) {
  auto argv = launchArguments(launching(HttpApi::Sglang, {"python3", "-m", "sglang.launch_server"}), 30000, "/f", 0);
  EXPECT_EQ(after(argv, "--model-path"), "/f");
  EXPECT_EQ(after(argv, "--port"), "30000");
  EXPECT_EQ(argv.size(), 9u);
  // openai: the command is taken as written; every placeholder in an argument is replaced.
  argv = launchArguments(launching(HttpApi::Openai, {"serve", "{model}", "--port={port}", "--tag={local_rank}-{port}"}),
                         8000, "/m", 3);
  EXPECT_EQ(argv, (std::vector<std::string>{"serve", "/m", "--port=8000", "--tag=3-8000"}));
  RolloutBackendSpec spec = launching(HttpApi::Openai, {"x"});
  spec.launch.env = {{"CUDA_VISIBLE_DEVICES", "{local_rank}"}};
  const auto env = launchEnvironment(spec, 2);
  EXPECT_EQ(env, (std::vector<std::pair<std::string, std::string>>{{"CUDA_VISIBLE_DEVICES", "2"}}));
}
