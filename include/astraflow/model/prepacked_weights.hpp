#pragma once
// What packing an fp32 CPU engine's weights costs in memory (rollout.prepacked_weights,
// PolicyModelImpl::setPrepackedWeights), in a header light enough for the memory plan.
#include <cstdint>

#include "astraflow/core/model_config.hpp"

namespace astraflow {

// A product of fewer weight elements is left to LibTorch: MKL's packed form costs ~8 MB however
// small the weight, and small weights run from cache anyway.
inline constexpr std::int64_t kMinPrepackedElements = std::int64_t{1} << 20;

// The bytes a model of this shape holds packed once setPrepackedWeights(true) has run a forward
// (0 where LibTorch has no MKL): the memory plan's figure.
std::uint64_t prepackedWeightBytes(const ModelConfig& config, std::int64_t min_elements = kMinPrepackedElements);

}  // namespace astraflow
