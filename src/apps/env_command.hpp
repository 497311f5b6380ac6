#pragma once
// `astraflow env check CONFIG`: what a run of this config's environment would show the policy and
// get back — the MCP servers' tools, a few episodes played by a scripted policy through the real
// environment, tools and reward program — before a long job is started (docs/tasks.md).
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct EnvCheckArgs;

struct EnvCommand {
  CLI::App* check = nullptr;
  std::shared_ptr<EnvCheckArgs> args;  // what CLI11 parses into (must outlive the parse)
  int run() const;                     // its exit code, or -1 when another command was chosen
};
EnvCommand addEnvCommand(CLI::App& app);

}  // namespace astraflow
