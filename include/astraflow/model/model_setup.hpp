#pragma once
// What a rank needs of the model without compiling against LibTorch (its headers cost ~20 s per
// file on a 2-core machine): the size of a weight version, and the thread count. Defined in
// src/model/model_builder.cpp.
#include <cstdint>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/model_config.hpp"

namespace astraflow {

// Bytes of one full weight version of a policy's model (its weight store's capacity). Builds
// the model once to measure it; a simulated trainer's trainer.simulate.weight_bytes when set.
std::uint64_t weightVersionBytes(const Config& config, const TokenSpec& tokens, const std::string& policy = {});

// Every model-holding role's device request in `config` (trainer.device, rollout.device) can be
// met on this machine; else Error naming the key. Loads the CUDA plug-in only if one asks for cuda.
void checkDeviceRequests(const Config& config);

// Loads the CUDA plug-in now (no-op after the first call). A process that will use CUDA must
// load it before LibTorch first asks for its CUDA hooks (seeding all devices, say), which would
// fix them to the CPU-only stub; the run calls this first on every rank whose role asks for cuda.
void loadCudaSupport();

// Threads for LibTorch/OpenBLAS: role_threads (trainer.threads, rollout.threads) when set, else
// run.threads_per_rank (0: cores / ranks_on_node).
void configureThreads(const Config& config, int ranks_on_node, int role_threads = 0);

}  // namespace astraflow
