// The CUDA plug-in (libastraflow_cuda.so): linked against libtorch_cuda, so loading it makes
// CUDA usable in a process that started with the CPU LibTorch alone (its static registrations
// install LibTorch's CUDA hooks), and home of the one thing that needs CUDA headers: the c10d
// NCCL backend. Loaded by src/model/device.cpp with dlopen only when a role asks for cuda.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "astraflow/model/cuda_plugin_abi.hpp"

extern "C" {

__attribute__((visibility("default"))) int astraflow_cuda_device_count() {
  try {
    return static_cast<int>(c10::cuda::device_count());
  } catch (const std::exception&) {
    return 0;  // no driver: LibTorch reports no device rather than an error here
  }
}

__attribute__((visibility("default"))) int astraflow_cuda_set_device(int device) {
  try {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

__attribute__((visibility("default"))) c10d::Backend* astraflow_make_nccl_backend(c10d::Store* store, int rank,
                                                                                  int size, int device, char* error,
                                                                                  unsigned long error_size) {
  try {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::intrusive_ptr<c10d::Store>::reclaim_copy(store),
                                                               rank, size, options);
    // Bound to the rank's GPU, so the communicator is made for this device alone, and made now:
    // two ranks of a group on one GPU (which NCCL refuses) fail here, not at the first step.
    const c10::Device gpu(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
    backend->setBoundDeviceId(gpu);
    backend->eagerConnectSingleDevice(gpu);
    return c10::intrusive_ptr<c10d::Backend>(std::move(backend)).release();
  } catch (const std::exception& e) {
    if (error && error_size) std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) int astraflow_cuda_memory_peaks(int device, unsigned long long* allocated,
                                                                       unsigned long long* reserved) {
  try {
    // Index 0 of each StatArray is the aggregate over pool kinds.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    *allocated = static_cast<unsigned long long>(stats.allocated_bytes[0].peak);
    *reserved = static_cast<unsigned long long>(stats.reserved_bytes[0].peak);
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

__attribute__((visibility("default"))) int astraflow_cuda_memory_info(int device, unsigned long long* free,
                                                                      unsigned long long* total) {
  try {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    std::size_t driver_free = 0, driver_total = 0;
    if (cudaMemGetInfo(&driver_free, &driver_total) != cudaSuccess) return -1;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto cached = stats.reserved_bytes[0].current - stats.allocated_bytes[0].current;
    *free = static_cast<unsigned long long>(driver_free) +
            static_cast<unsigned long long>(std::max<std::int64_t>(0, cached));
    *total = static_cast<unsigned long long>(driver_total);
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // extern "C"

// The declarations in the ABI header and the definitions above must agree.
static_assert(static_cast<AstraflowCudaDeviceCountFn>(&astraflow_cuda_device_count) != nullptr);
static_assert(static_cast<AstraflowCudaSetDeviceFn>(&astraflow_cuda_set_device) != nullptr);
static_assert(static_cast<AstraflowMakeNcclBackendFn>(&astraflow_make_nccl_backend) != nullptr);
static_assert(static_cast<AstraflowCudaMemoryPeaksFn>(&astraflow_cuda_memory_peaks) != nullptr);
static_assert(static_cast<AstraflowCudaMemoryInfoFn>(&astraflow_cuda_memory_info) != nullptr);
