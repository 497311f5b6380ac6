#pragma once
// `astraflow serve MODEL_DIR`: the inference server of include/astraflow/serve/inference_server.hpp
// in the foreground until SIGINT or SIGTERM.
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct ServeArgs;

struct ServeCommand {
  CLI::App* command = nullptr;
  std::shared_ptr<ServeArgs> args;  // what CLI11 parses into (must outlive the parse)
  int run() const;                  // its exit code, or -1 when another command was chosen
};
ServeCommand addServeCommand(CLI::App& app);

}  // namespace astraflow
