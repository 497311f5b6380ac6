// Device requests resolved on this rank, and the CUDA plug-in loaded on first use.
#include "astraflow/model/device.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "astraflow/core/error.hpp"
#include "astraflow/model/cuda_plugin_abi.hpp"
#include "astraflow/model/model_setup.hpp"

namespace astraflow {

namespace {

struct CudaPlugin {
  void* handle = nullptr;
  std::string reason;  // "" = loaded
  int devices = 0;
};

// ASTRAFLOW_CUDA_PLUGIN names the file; else the build's layout: <build>/bin/<program> and
// <build>/lib/libastraflow_cuda.so.
std::string pluginPath() {
  if (const char* env = std::getenv("ASTRAFLOW_CUDA_PLUGIN"); env && *env) return env;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "libastraflow_cuda.so";
  exe[n] = '\0';
  return (std::filesystem::path(exe).parent_path().parent_path() / "lib" / "libastraflow_cuda.so").string();
}

CudaPlugin& plugin() {
  static CudaPlugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = pluginPath();
    if (!std::filesystem::exists(path)) {
      p.reason = fmt::format(
          "this build has no CUDA support: {} does not exist (the LibTorch it was built with has no libtorch_cuda, "
          "or ASTRAFLOW_CUDA_PLUGIN points elsewhere)",
          path);
      return;
    }
    // RTLD_GLOBAL: libtorch_cuda's registrations (CUDA hooks, kernels) must reach the LibTorch
    // already loaded by this process.
    p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!p.handle) {
      p.reason = fmt::format("cannot load the CUDA plug-in {}: {}", path, dlerror());
      return;
    }
    auto count = reinterpret_cast<AstraflowCudaDeviceCountFn>(dlsym(p.handle, kAstraflowCudaDeviceCount));
    if (!count) {
      p.reason = fmt::format("the CUDA plug-in {} lacks {}", path, kAstraflowCudaDeviceCount);
      return;
    }
    p.devices = count();
    if (p.devices <= 0) p.reason = "this machine has no CUDA device (or no working NVIDIA driver)";
  });
  return p;
}

void requireCuda(const DeviceRequest& request, const std::string& key) {
  const std::string& why = cudaUnavailableReason();
  if (!why.empty()) {
    throw Error(fmt::format("{}: '{}' asks for a GPU, but {}; allowed here: cpu", key, request.text(), why));
  }
  if (request.index >= cudaDeviceCount()) {
    throw Error(fmt::format("{}: '{}' names GPU {}, but this machine shows {} (cuda:0 … cuda:{}, or plain cuda)", key,
                            request.text(), request.index, cudaDeviceCount(), cudaDeviceCount() - 1));
  }
}

}  // namespace

const std::string& cudaUnavailableReason() { return plugin().reason; }

int cudaDeviceCount() { return plugin().reason.empty() ? plugin().devices : 0; }

void* cudaPluginSymbol(const char* name) {
  CudaPlugin& p = plugin();
  return p.handle && p.reason.empty() ? dlsym(p.handle, name) : nullptr;
}

torch::Device resolveDevice(const DeviceRequest& request, int node_slot, const std::string& key) {
  if (!request.cuda()) return torch::Device(torch::kCPU);
  requireCuda(request, key);
  const int index = request.index >= 0 ? request.index : std::max(0, node_slot) % cudaDeviceCount();
  auto set = reinterpret_cast<AstraflowCudaSetDeviceFn>(cudaPluginSymbol(kAstraflowCudaSetDevice));
  if (!set || set(index) != 0) throw Error(fmt::format("{}: cannot make GPU {} the current device", key, index));
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void loadCudaSupport() { (void)plugin(); }

void checkDeviceRequests(const Config& config) {
  if (config.trainer.compute.device.cuda()) requireCuda(config.trainer.compute.device, "trainer.device");
  if (config.rollout.compute.device.cuda()) requireCuda(config.rollout.compute.device, "rollout.device");
}

torch::ScalarType computeDtype(const ComputeOptions& compute) {
  return compute.bf16() ? torch::kBFloat16 : torch::kFloat32;
}

at::Generator makeGenerator(const torch::Device& device, std::uint64_t seed) {
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Generator g = at::detail::getCUDAHooks().getNewGenerator(device.index());
  g.set_current_seed(seed);
  return g;
}

DeviceMemory deviceMemory(const torch::Device& device) {
  DeviceMemory m;
  if (device.is_cuda()) {
    auto info = reinterpret_cast<AstraflowCudaMemoryInfoFn>(cudaPluginSymbol(kAstraflowCudaMemoryInfo));
    unsigned long long free = 0, total = 0;
    if (info && info(device.index() < 0 ? 0 : device.index(), &free, &total) == 0) m.free = free, m.total = total;
    return m;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") m.total = kib * 1024;
    if (key == "MemAvailable:") m.free = kib * 1024;
  }
  return m;
}

MemoryUse memoryUse(const torch::Device& device) {
  MemoryUse m;
  // statm: size resident shared … in pages.
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  if (statm >> size >> resident) m.rss_bytes = resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    m.peak_rss_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // KiB
  if (device.is_cuda()) {
    auto peaks = reinterpret_cast<AstraflowCudaMemoryPeaksFn>(cudaPluginSymbol(kAstraflowCudaMemoryPeaks));
    unsigned long long allocated = 0, reserved = 0;
    if (peaks && peaks(device.index(), &allocated, &reserved) == 0) {
      m.device_peak_allocated = allocated;
      m.device_peak_reserved = reserved;
    }
  }
  return m;
}

}  // namespace astraflow
