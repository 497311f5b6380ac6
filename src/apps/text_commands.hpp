#pragma once
// The tokenizer and scoring commands of the CLI: `astraflow tokenize`, `astraflow score`.
#include <CLI/CLI.hpp>

#include <memory>

namespace astraflow {

struct TokenizeArgs;
struct ScoreArgs;

// Adds `tokenize` and `score` to `app`; run() carries out the one chosen (its exit code), or
// returns -1 when another command was chosen.
struct TextCommands {
  CLI::App* tokenize = nullptr;
  CLI::App* score = nullptr;
  // What CLI11 parses into (must outlive the parse).
  std::shared_ptr<TokenizeArgs> tokenize_args;
  std::shared_ptr<ScoreArgs> score_args;
  int run() const;
};
TextCommands addTextCommands(CLI::App& app);

}  // namespace astraflow
