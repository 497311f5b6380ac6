#pragma once
// Where a role's model lives (trainer.device, rollout.device) and in which dtype it computes
// (docs/gpu.md). CUDA comes from a plug-in (libastraflow_cuda.so, src/cuda) that this process
// loads the first time a role asks for it: a CPU run never loads libtorch_cuda or any CUDA
// library, and a build on a CPU-only LibTorch has no plug-in and refuses `cuda` by name.
#include <torch/types.h>

#include <cstdint>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/model_config.hpp"

namespace astraflow {

// "" once CUDA is usable in this process (the plug-in loaded), else why not. Loads it on the
// first call; thread-safe.
const std::string& cudaUnavailableReason();
// Visible CUDA devices: 0 without the plug-in or without a GPU.
int cudaDeviceCount();
// An entry point of the loaded plug-in (nullptr when it is not loaded or lacks the name).
void* cudaPluginSymbol(const char* name);

// This rank's device for `request` (config key `key`, for messages). Plain `cuda` takes GPU
// node_slot mod the visible count (node_slot: the rank's index among the ranks of its node that
// ask for plain cuda). Throws Error naming the key when CUDA is unusable or N is out of range.
torch::Device resolveDevice(const DeviceRequest& request, int node_slot, const std::string& key);
// checkDeviceRequests (`astraflow validate`): in model_setup.hpp, which needs no LibTorch.

// The engine's weight and KV-cache dtype: bf16 or fp32 (ComputeOptions::bf16()).
torch::ScalarType computeDtype(const ComputeOptions& compute);

// What this process holds in memory (the trainer's accounting, docs/training.md): its resident
// set now and at its peak (the kernel's figures: /proc/self/statm, getrusage), and on a CUDA
// device the caching allocator's peaks of allocated and reserved bytes there (0 elsewhere).
struct MemoryUse {
  std::uint64_t rss_bytes = 0;
  std::uint64_t peak_rss_bytes = 0;
  std::uint64_t device_peak_allocated = 0;
  std::uint64_t device_peak_reserved = 0;
};
MemoryUse memoryUse(const torch::Device& device);

// What `device` holds for this process's new tensors: on CUDA the driver's free bytes plus
// LibTorch's cached but unallocated ones, and the device's total; on the CPU the host's
// available memory (MemAvailable) and total. Zeros when they cannot be read.
struct DeviceMemory {
  std::uint64_t free = 0, total = 0;
};
DeviceMemory deviceMemory(const torch::Device& device);

// A random generator on `device` (sampling draws on the device its logits are on).
at::Generator makeGenerator(const torch::Device& device, std::uint64_t seed);

}  // namespace astraflow
