#pragma once
// `astraflow eval CONFIG --checkpoint FILE | --hf FOLDER`: a trained policy evaluated on the
// config's evaluation sets without training (include/astraflow/run/offline_eval.hpp).
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct EvalArgs;

struct EvalCommand {
  CLI::App* command = nullptr;
  std::shared_ptr<EvalArgs> args;  // what CLI11 parses into (must outlive the parse)
  int run() const;                 // its exit code, or -1 when another command was chosen
};
EvalCommand addEvalCommand(CLI::App& app);

}  // namespace astraflow
