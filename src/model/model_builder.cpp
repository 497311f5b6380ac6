// Building a run's policy models from the config, and the LibTorch/BLAS thread count per rank.
#include "astraflow/model/model_builder.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "astraflow/core/error.hpp"
#include "astraflow/model/weight_blob.hpp"

namespace astraflow {

void configureThreads(const Config& config, int ranks_on_node) {
  int threads = config.run.threads_per_rank;
  if (threads <= 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, ranks_on_node));
  }
  torch::set_num_threads(threads);
  // A LibTorch that calls BLAS through libblas.so.3 (Debian's, some site builds) may get
  // OpenBLAS, which keeps its own thread pool that torch::set_num_threads does not size; without
  // this, oversubscribed ranks thrash and sums change with the thread count. The wheel's LibTorch
  // has MKL inside (sized by set_num_threads), and no openblas symbol is found.
  using SetThreads = void (*)(int);
  if (auto set_blas = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(threads);
  }
}

PolicyModel buildPolicyModel(const Config& config, const TokenSpec& tokens, const std::string& policy,
                             const torch::Device& device, torch::ScalarType dtype) {
  const PolicySection* section = policy.empty() ? &config.policies.front() : config.findPolicy(policy);
  if (!section) throw Error(fmt::format("no policy '{}' in {}", policy, config.source));
  ModelConfig m = section->model;
  m.vocab_size = tokens.vocab_size;
  // The CPU generator only: torch::manual_seed would also seed the accelerators, and asking
  // LibTorch for its CUDA hooks before the CUDA plug-in is loaded fixes them to the stub for
  // the life of the process (docs/gpu.md).
  {
    auto cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_current_seed(config.run.seed);
  }
  PolicyModel model(m);
  model->setNeverGenerate({tokens.pad_id, tokens.bos_id});
  if (device != torch::Device(torch::kCPU) || dtype != torch::kFloat32) model->place(device, dtype);
  return model;
}

std::uint64_t weightVersionBytes(const Config& config, const TokenSpec& tokens, const std::string& policy) {
  return packedWeightBytes(*buildPolicyModel(config, tokens, policy));
}

}  // namespace astraflow
