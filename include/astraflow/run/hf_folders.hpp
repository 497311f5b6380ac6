#pragma once
// Writing Hugging Face model folders: `astraflow init-model` (a new random model with a
// tokenizer) and `astraflow export-hf` (a trained policy out of an astraflow checkpoint). No LibTorch here: the CLI's
// main includes it.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/core/model_config.hpp"
#include "astraflow/model/hf_weights.hpp"

namespace astraflow {

// The presets of init-model: "tiny-qwen3" (a 2-block Qwen3 for tests and demos) and
// "qwen3-0.6b" (the shape of Qwen3-0.6B: 28 blocks, 1024 wide, 16/8 heads of 128).
std::vector<std::string> modelPresetNames();
// Throws Error listing the presets for an unknown name. vocab_size 0: sized from the tokenizer.
ModelConfig modelPreset(const std::string& name);

struct InitModelOptions {
  ModelConfig model;                              // a preset with the user's changes
  std::string tokenizer;                          // a tokenizer.json to copy; empty: the byte-level one
  bool bf16 = false;                              // weights stored as bfloat16 (else float32)
  std::uint64_t seed = 0;                         // the weights' draw
  std::uint64_t max_shard_bytes = 5'000'000'000;  // transformers' save_pretrained default (5 GB)
};

struct InitModelResult {
  ModelConfig model;  // with the vocabulary size chosen
  std::int64_t parameters = 0;
  std::vector<std::filesystem::path> files;  // weight files written
};

// Writes config.json, generation_config.json, the safetensors weights (drawn as astraflow
// initialises a policy: N(0, 0.02), norms 1, biases 0) and the tokenizer files into `folder`,
// which must not hold a config.json already. vocab_size 0 takes the tokenizer's size rounded up
// to a multiple of 64; a vocab_size smaller than the tokenizer's is refused.
InitModelResult initModel(const std::filesystem::path& folder, const InitModelOptions& options);

struct ExportHfOptions {
  std::string policy;  // which policy of the checkpoint; empty: its only one
  bool bf16 = false;   // weights stored as bfloat16 (else float32, the trainer's master weights)
  std::uint64_t max_shard_bytes = 5'000'000'000;
  HfHead head = HfHead::AsModel;  // Separate: a tied head written as its own tensor (--untied, for vLLM)
};

struct ExportHfResult {
  std::filesystem::path checkpoint;  // the file read
  std::string policy;
  std::int64_t version = 0;
  ModelConfig model;
  std::vector<std::filesystem::path> files;  // weight files written
};

// Writes one policy of an astraflow checkpoint as a Hugging Face folder `out`: config.json from
// the checkpoint's model attributes, the weights, generation_config.json, and the tokenizer the
// policy was trained with — today always the built-in task vocabulary, as a tokenizer.json. `source` is a checkpoint
// file (the warm start sft.h5, a trainer checkpoint checkpoints/step_V.<policy>.h5) or a run folder (its newest
// complete checkpoint). Throws Error naming the file for anything it cannot use; `out` must not hold a config.json
// already.
ExportHfResult exportHf(const std::filesystem::path& source, const std::filesystem::path& out,
                        const ExportHfOptions& options);

}  // namespace astraflow
