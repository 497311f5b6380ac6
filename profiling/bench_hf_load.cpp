// bench_hf_load FOLDER: loading a Hugging Face folder into a policy model (readHfModelConfig,
// the model built uninitialised, loadHfWeights) mapped (HfLoad::Map) and copied (HfLoad::Copy),
// side by side, against reading the same weight files with `cat > /dev/null`, all with the
// files in the page cache (cat is run once first), and the resident set each load adds. Make a folder with e.g.
//   build/bin/astraflow init-model /tmp/q06 --preset qwen3-0.6b --dtype bfloat16
// One thread; no MPI traffic.
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// The process's resident set now (VmRSS), in bytes.
double residentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  return 0;
}

struct Load {
  double seconds = 0, resident = 0;  // the load's time, and the resident set it added (model alive)
  bool mapped = false;
  std::int64_t fp32_bytes = 0;
};

Load load(const std::filesystem::path& folder, HfLoad how) {
  Load out;
  const double before = residentBytes();
  const double t = seconds();
  PolicyModel model(readHfModelConfig(folder.string()).model);
  out.mapped = loadHfWeights(*model, folder, how);
  out.seconds = seconds() - t;
  out.resident = residentBytes() - before;
  out.fp32_bytes = model->parameterCount() * 4;
  return out;
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
  // Mapped first: the copy's freed model would otherwise stay in the heap and hide the map's
  // resident set from the difference.
  const Load mapped = load(folder, HfLoad::Map);
  const Load copied = load(folder, HfLoad::Copy);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak = static_cast<double>(usage.ru_maxrss) * 1024.0;  // KiB on Linux
  const double mb = 1e6, model = static_cast<double>(copied.fp32_bytes);
  std::printf("bench_hf_load: %s, %.0f MB of safetensors, float32 model %.0f MB, 1 thread\n", argv[1], file_bytes / mb,
              model / mb);
  std::printf("cat > /dev/null (page cache)       %8.2f s\n", cat);
  std::printf("load, HfLoad::Copy                 %8.2f s   resident +%6.0f MB (%.2f x the model)\n", copied.seconds,
              copied.resident / mb, copied.resident / model);
  std::printf("load, HfLoad::Map (%s)    %8.2f s   resident +%6.0f MB (%.2f x the model)\n",
              mapped.mapped ? "mapped   " : "converted", mapped.seconds, mapped.resident / mb, mapped.resident / model);
  std::printf("ratio (Map / Copy)                 %8.2f\n", mapped.seconds / copied.seconds);
  std::printf("ratio (Copy / cat)                 %8.2f\n", copied.seconds / cat);
  std::printf("peak RSS of the process            %8.0f MB\n", peak / mb);
  return 0;
}
