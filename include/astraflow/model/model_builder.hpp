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
// m.hf_path is set: the caller loads the folder's weights; or when `uninitialised`).
PolicyModel newPolicyModel(const ModelConfig& m, std::uint64_t seed, bool uninitialised = false);

// What a built model starts with: the policy's weights (drawn from the run seed, or read from
// its Hugging Face folder), or storage a weight version fills before any use — a rollout
// rank's engine (every task waits for version 0 or later from the store) and the copies that
// only write versions out. Those skip the draw and the folder read, and their parameters are
// allocated directly in the engine's dtype: a Qwen3-0.6B-shaped engine no longer holds the
// folder's fp32 weights and their bf16 conversion at start (docs/memory.md).
enum class InitialWeights { Policy, FromStore };

// Builds a policy's model (vocabulary from `tokens`) with the run seed; the first policy's when
// `policy` is empty. Throws Error for a policy the config does not define. The weights are drawn
// on the CPU and then placed on `device` in `dtype`, so every rank starts from the same ones
// whatever its device.
PolicyModel buildPolicyModel(const Config& config, const TokenSpec& tokens, const std::string& policy = {},
                             const torch::Device& device = torch::kCPU, torch::ScalarType dtype = torch::kFloat32,
                             InitialWeights initial = InitialWeights::Policy);

}  // namespace astraflow
