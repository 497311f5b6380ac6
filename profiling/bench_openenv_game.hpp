#pragma once
// The OpenEnv game the benchmarks play (examples/openenv_guess, five guesses of a number from 1 to
// 16): the `openenv` environment's options with a server each process starts, and a byte-level
// tokenizer folder for its chat template, made in `dir`.
#include <filesystem>
#include <string>

#include "astraflow/core/environment_options.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"

namespace astraflow::bench {

inline EnvironmentOptions openenvGuessGame(const std::filesystem::path& dir, const std::string& python,
                                           const std::string& server_script) {
  std::filesystem::create_directories(dir / "model");
  writeByteLevelTokenizer(dir / "model");
  EnvironmentOptions options;
  options.name = "openenv";
  options.max_turns = 5;
  options.dataset.tokenizer_folders = {(dir / "model").string()};
  options.openenv.command = {python, server_script, "--port", "{port}"};
  options.openenv.log_dir = (dir / "logs").string();
  options.openenv.reset_json = R"({"turns": 5})";
  options.openenv.observation_field = "prompt";
  return options;
}

}  // namespace astraflow::bench
