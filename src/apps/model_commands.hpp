#pragma once
// The model-folder commands of the CLI: `astraflow init-model`, `astraflow export-hf`,
// `astraflow export-gguf`.
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct InitModelArgs;
struct ExportHfArgs;
struct ExportGgufArgs;

// Adds `init-model`, `export-hf` and `export-gguf` to `app`; run() carries out the one chosen (its exit code),
// or returns -1 when another command was chosen.
struct ModelCommands {
  CLI::App* init_model = nullptr;
  CLI::App* export_hf = nullptr;
  CLI::App* export_gguf = nullptr;
  // What CLI11 parses into (must outlive the parse).
  std::shared_ptr<InitModelArgs> init_args;
  std::shared_ptr<ExportHfArgs> export_args;
  std::shared_ptr<ExportGgufArgs> gguf_args;
  int run() const;
};
ModelCommands addModelCommands(CLI::App& app);

}  // namespace astraflow
