// bench_hf_load FOLDER: loading a Hugging Face folder into a policy model (readHfModelConfig,
// the model built uninitialised, loadHfWeights) against reading the same weight files with
// `cat > /dev/null`, both with the files in the page cache (each is run once first), and the
// process's peak RSS against the size of the float32 model it builds. Make a folder with e.g.
//   build/bin/astraflow init-model /tmp/q06 --preset qwen3-0.6b --dtype bfloat16
// One thread; no MPI traffic.
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/policy_model.hpp"

using namespace astraflow;

namespace {

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double catSeconds(const std::string& files) {
  const double t = seconds();
  if (std::system(("cat " + files + " > /dev/null").c_str()) != 0) std::fprintf(stderr, "cat failed\n");
  return seconds() - t;
}

double loadSeconds(const std::filesystem::path& folder, std::int64_t& fp32_bytes) {
  const double t = seconds();
  PolicyModel model(readHfModelConfig(folder.string()).model);
  loadHfWeights(*model, folder);
  const double elapsed = seconds() - t;
  fp32_bytes = model->parameterCount() * 4;
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_hf_load FOLDER\n");
    return 2;
  }
  at::set_num_threads(1);
  const std::filesystem::path folder = argv[1];
  std::string files;
  std::uintmax_t file_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".safetensors") {
      files += " '" + entry.path().string() + "'";
      file_bytes += entry.file_size();
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "bench_hf_load: no .safetensors files in %s\n", argv[1]);
    return 2;
  }
  catSeconds(files);  // into the page cache
  const double cat = catSeconds(files);
  std::int64_t fp32_bytes = 0;
  const double load = loadSeconds(folder, fp32_bytes);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak = static_cast<double>(usage.ru_maxrss) * 1024.0;  // KiB on Linux
  const double mb = 1e6;
  std::printf("bench_hf_load: %s, %.0f MB of safetensors, float32 model %.0f MB, 1 thread\n", argv[1], file_bytes / mb,
              fp32_bytes / mb);
  std::printf("cat > /dev/null (page cache)     %8.2f s\n", cat);
  std::printf("load into the policy model       %8.2f s\n", load);
  std::printf("ratio (load / cat)               %8.2f\n", load / cat);
  std::printf("peak RSS                         %8.0f MB\n", peak / mb);
  std::printf("ratio (peak RSS / float32 model) %8.2f\n", peak / static_cast<double>(fp32_bytes));
  return 0;
}
