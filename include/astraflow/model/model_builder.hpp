#pragma once
// A policy's model as the config describes it, built the same way on every rank that holds one
// (trainers, rollout ranks, the local loops), so their weights agree bit for bit from the seed.
#include <cstdint>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/model_config.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/model/model_setup.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// A model of `m` on the CPU in float32, its weights drawn from `seed` (uninitialised when
// m.hf_path is set: the caller loads the folder's weights).
PolicyModel newPolicyModel(const ModelConfig& m, std::uint64_t seed);

// Builds a policy's model (vocabulary from `tokens`) with the run seed; the first policy's when
// `policy` is empty. Throws Error for a policy the config does not define. The weights are drawn
// on the CPU and then placed on `device` in `dtype`, so every rank starts from the same ones
// whatever its device.
PolicyModel buildPolicyModel(const Config& config, const TokenSpec& tokens, const std::string& policy = {},
                             const torch::Device& device = torch::kCPU, torch::ScalarType dtype = torch::kFloat32);

}  // namespace astraflow
