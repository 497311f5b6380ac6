#pragma once
// `astraflow reward`: the verifiable rewards (include/astraflow/tasks/reward.hpp) on JSON lines,
// for users checking their reward set-up and for tests.
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct RewardArgs;

struct RewardCommand {
  CLI::App* command = nullptr;
  std::shared_ptr<RewardArgs> args;  // what CLI11 parses into (must outlive the parse)
  int run() const;                   // its exit code, or -1 when another command was chosen
};
RewardCommand addRewardCommand(CLI::App& app);

}  // namespace astraflow
