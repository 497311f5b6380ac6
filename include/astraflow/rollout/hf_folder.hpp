#pragma once
// A policy's weights as a Hugging Face folder — config.json, generation_config.json, safetensors
// and the tokenizer the policy's ids come from — which transformers, `astraflow serve`, SGLang
// and vLLM load. `astraflow export-hf` writes one from a checkpoint; an http rollout pool writes
// one per weight version for its server (docs/rollout-backends.md).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "astraflow/core/model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// Writes `model`'s weights (float32, or bfloat16 when `bf16`) and the folder's other files into
// `folder`. The tokenizer is `m.tokenizer_folder`'s tokenizer.json (with its tokenizer_config.json),
// or the built-in task vocabulary when that is empty; Error when the folder named is gone.
// Returns the weight files.
// `head`: HfHead::Separate writes a tied model's head as its own tensor, config.json untied.
std::vector<std::filesystem::path> writeHfFolder(const PolicyModelImpl& model, ModelConfig m,
                                                 const std::filesystem::path& folder, bool bf16,
                                                 std::uint64_t max_shard_bytes, HfHead head = HfHead::AsModel);

// config.json (transformers' fields for `m`, weights stored as bf16 or float32) and
// generation_config.json with the tokenizer's special ids (-1: none).
void writeHfModelFiles(const std::filesystem::path& folder, const ModelConfig& m, bool bf16, int bos_id, int eos_id,
                       int pad_id);

}  // namespace astraflow
