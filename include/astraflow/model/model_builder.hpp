#pragma once
// A policy's model as the config describes it, built the same way on every rank that holds one
// (trainers, rollout ranks, the local loops), so their weights agree bit for bit from the seed.
#include <cstdint>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/model_config.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// Builds a policy's model (vocabulary from `tokens`) with the run seed; the first policy's when
// `policy` is empty. Throws Error for a policy the config does not define.
PolicyModel buildPolicyModel(const Config& config, const TokenSpec& tokens, const std::string& policy = {});

// Bytes of one full weight version of a policy's model (its weight store's capacity). Builds
// the model once to measure it.
std::uint64_t weightVersionBytes(const Config& config, const TokenSpec& tokens, const std::string& policy = {});

// Threads for LibTorch/OpenBLAS from run.threads_per_rank (0: cores / ranks_on_node).
void configureThreads(const Config& config, int ranks_on_node);

}  // namespace astraflow
