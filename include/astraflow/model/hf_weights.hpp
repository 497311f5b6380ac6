#pragma once
// A policy model's weights in a Hugging Face folder's safetensors files, by Hugging Face name:
// loading them into a model built from the folder's config.json, and writing them out.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// Loads <folder>'s model.safetensors (or its shards, through model.safetensors.index.json) into
// `model`, converting F32/F16/BF16/F64 to the parameters' dtype straight from the memory map
// (no intermediate copy). Every parameter must be present with its shape and finite values;
// a tensor the model has no parameter for is refused by name, except an lm_head.weight equal to
// the embeddings when config.json ties them. Nothing is copied unless every tensor passes.
void loadHfWeights(PolicyModelImpl& model, const std::filesystem::path& folder);

// Writes the model's parameters into `folder` as safetensors in float32 or bfloat16
// (`bf16`), one file or shards of at most `max_shard_bytes` with their index. Returns the files.
std::vector<std::filesystem::path> writeHfWeights(const PolicyModelImpl& model, const std::filesystem::path& folder,
                                                  bool bf16, std::uint64_t max_shard_bytes);

}  // namespace astraflow
