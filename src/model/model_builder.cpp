// Building a run's policy models from the config, and the LibTorch/BLAS thread count per rank.
#include "astraflow/model/model_builder.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/weight_blob.hpp"

namespace astraflow {

namespace {

// config.json fields astraflow does not read (none of them changes the forward pass, or
// readHfModelConfig would have refused it): said once per folder and process, so none passes
// unseen.
void logUnreadHfFields(const std::string& folder) {
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard<std::mutex> lock(mutex);
  if (!told.insert(folder).second) return;
  const auto unread = readHfModelConfig(folder).unread_fields;
  if (!unread.empty())
    spdlog::warn("{}/config.json: fields astraflow does not read: {}", folder, fmt::join(unread, ", "));
}

}  // namespace

void configureThreads(const Config& config, int ranks_on_node, int role_threads) {
  int threads = role_threads > 0 ? role_threads : config.run.threads_per_rank;
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

PolicyModel newPolicyModel(const ModelConfig& m, std::uint64_t seed, bool uninitialised) {
  // The CPU generator only: torch::manual_seed would also seed the accelerators, and asking
  // LibTorch for its CUDA hooks before the CUDA plug-in is loaded fixes them to the stub for
  // the life of the process (docs/gpu.md).
  {
    auto cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_current_seed(seed);
  }
  return PolicyModel(m, uninitialised);
}

PolicyModel buildPolicyModel(const Config& config, const TokenSpec& tokens, const std::string& policy,
                             const torch::Device& device, torch::ScalarType dtype, InitialWeights initial) {
  const bool from_store = initial == InitialWeights::FromStore;
  const PolicySection* section = policy.empty() ? &config.policies.front() : config.findPolicy(policy);
  if (!section) throw Error(fmt::format("no policy '{}' in {}", policy, config.source));
  ModelConfig m = section->model;
  if (usesPolicyTokenizer(config.environment.name))
    m.tokenizer_folder = config.environment.dataset.tokenizer_folders.at(0);
  if (m.hf_path.empty()) {
    m.vocab_size = tokens.vocab_size;
  } else if (tokens.vocab_size > m.vocab_size) {
    throw Error(fmt::format("policy '{}': the tokenizer has {} tokens but {}/config.json has vocab_size {}",
                            section->name, tokens.vocab_size, m.hf_path, m.vocab_size));
  }
  PolicyModel model = newPolicyModel(m, config.run.seed, from_store);
  if (!m.hf_path.empty() && !from_store) {
    loadHfWeights(*model, m.hf_path, HfLoad::Map);  // mapped where the folder has the model's dtype
    logUnreadHfFields(m.hf_path);
  }
  // Ids past the tokenizer's (a folder's vocabulary is often padded, or larger than the
  // tokenizer in use) have no text: never generated, like <pad> and <bos>.
  std::vector<std::int64_t> never = {tokens.pad_id};
  if (tokens.bos_id >= 0) never.push_back(tokens.bos_id);
  for (std::int64_t id = tokens.vocab_size; id < m.vocab_size; ++id) never.push_back(id);
  model->setNeverGenerate(never);
  if (device != torch::Device(torch::kCPU) || dtype != torch::kFloat32) {
    if (from_store)
      model->placeUninitialised(device, dtype);
    else
      model->place(device, dtype);
  }
  return model;
}

std::uint64_t weightVersionBytes(const Config& config, const TokenSpec& tokens, const std::string& policy) {
  // A simulated trainer publishes versions of its configured size (docs/simulation.md).
  if (config.trainer.simulate.enabled && config.trainer.simulate.weight_bytes > 0) {
    return static_cast<std::uint64_t>(config.trainer.simulate.weight_bytes);
  }
  // Only the shapes count: no weights drawn or read.
  return packedWeightBytes(
      *buildPolicyModel(config, tokens, policy, torch::kCPU, torch::kFloat32, InitialWeights::FromStore));
}

}  // namespace astraflow
