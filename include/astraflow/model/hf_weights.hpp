#pragma once
// A policy model's weights in a Hugging Face folder's safetensors files, by Hugging Face name:
// loading them into a model built from the folder's config.json, and writing them out.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// How loadHfWeights puts the folder's values into the model. Copy: into the parameters the model
// holds. Map: where every tensor has its parameter's dtype (a float32 folder into a float32
// model) and the model is not parameter-sharded, the parameters become tensors over the files'
// copy-on-write memory map (kept alive by them): nothing is copied at load, untouched pages stay
// in the page cache (shared with other processes reading the same files), and a page the model
// writes (a trainer's step) becomes its own. Otherwise as Copy. For a model just built; a live
// engine's parameters (packed products, pointers taken) are loaded with Copy.
enum class HfLoad { Copy, Map };

// Loads <folder>'s model.safetensors (or its shards, through model.safetensors.index.json) into
// `model`, converting F32/F16/BF16/F64 to the parameters' dtype straight from the memory map
// (no intermediate copy), or mapping them (HfLoad::Map). Every parameter must be present with
// its shape and finite values; a tensor the model has no parameter for is refused by name,
// except an lm_head.weight equal to the embeddings when config.json ties them. Nothing is
// loaded unless every tensor passes. Returns whether the parameters were mapped.
bool loadHfWeights(PolicyModelImpl& model, const std::filesystem::path& folder, HfLoad how = HfLoad::Copy);

// The output head of a folder written from a model with tied embeddings: tied as the model is
// (no lm_head.weight), or a separate lm_head.weight, a copy of the embeddings, with config.json
// saying untied. vLLM 0.32 needs the second to take new weights in place: its in-place reload
// replaces the embedding tensor and leaves a tied head on the old one.
enum class HfHead { AsModel, Separate };

// Writes the model's parameters into `folder` as safetensors in float32 or bfloat16
// (`bf16`), one file or shards of at most `max_shard_bytes` with their index. Returns the files.
std::vector<std::filesystem::path> writeHfWeights(const PolicyModelImpl& model, const std::filesystem::path& folder,
                                                  bool bf16, std::uint64_t max_shard_bytes,
                                                  HfHead head = HfHead::AsModel);

}  // namespace astraflow
