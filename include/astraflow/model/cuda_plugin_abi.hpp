#pragma once
// The CUDA plug-in's entry points (src/cuda/cuda_plugin.cpp), resolved by name with dlsym.
// Both sides are compiled against the same LibTorch, so LibTorch types may cross.

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

extern "C" {
// Visible CUDA devices (c10::cuda::device_count()).
using AstraflowCudaDeviceCountFn = int (*)();
inline constexpr const char* kAstraflowCudaDeviceCount = "astraflow_cuda_device_count";

// Makes `device` this thread's current CUDA device (0, or -1 on failure): kernels and
// allocations without an explicit device, and the CUDA context, go there instead of GPU 0.
using AstraflowCudaSetDeviceFn = int (*)(int device);
inline constexpr const char* kAstraflowCudaSetDevice = "astraflow_cuda_set_device";

// A c10d NCCL backend over `store` for `rank` of `size`, on CUDA device `device`. Returns an
// owning pointer (c10::intrusive_ptr<c10d::Backend>::reclaim takes it), or nullptr with the
// reason in `error` (up to error_size bytes, NUL-terminated).
using AstraflowMakeNcclBackendFn = c10d::Backend* (*)(c10d::Store* store, int rank, int size, int device, char* error,
                                                      unsigned long error_size);
inline constexpr const char* kAstraflowMakeNcclBackend = "astraflow_make_nccl_backend";

// What `device` has free for this process: the driver's free bytes (cudaMemGetInfo) plus what
// LibTorch's caching allocator holds reserved but unallocated, and the device's total (0, or -1).
using AstraflowCudaMemoryInfoFn = int (*)(int device, unsigned long long* free, unsigned long long* total);
inline constexpr const char* kAstraflowCudaMemoryInfo = "astraflow_cuda_memory_info";

// The caching allocator's peaks on `device`: allocated and reserved bytes (0, or -1 on failure).
using AstraflowCudaMemoryPeaksFn = int (*)(int device, unsigned long long* allocated, unsigned long long* reserved);
inline constexpr const char* kAstraflowCudaMemoryPeaks = "astraflow_cuda_memory_peaks";
}
