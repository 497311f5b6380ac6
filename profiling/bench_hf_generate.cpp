// bench_hf_generate FOLDER [new_tokens] [threads] [prompt_tokens]: greedy generation with the
// KV cache from a Hugging Face folder (batch 1), the way a rollout rank generates; prints one
// JSON line {"tokens_per_s", "ids"}. profiling/bench_hf_generate.sh runs transformers' generate
// on the same folder, prompt and threads beside it, checks the greedy continuations agree and
// prints the ratio.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/rollout/generation.hpp"

using namespace astraflow;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_hf_generate FOLDER [new_tokens] [threads] [prompt_tokens]\n");
    return 2;
  }
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 32;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int prompt_tokens = argc > 4 ? std::atoi(argv[4]) : 16;
  torch::set_num_threads(threads);
  ModelConfig m = readHfModelConfig(argv[1]).model;
  m.max_seq_len = prompt_tokens + new_tokens;
  PolicyModel model(m);
  loadHfWeights(*model, argv[1]);
  model->eval();
  GenerationEngine engine(model, 0);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < prompt_tokens; ++i) prompt.push_back(100 + 7 * i);  // the script gives transformers the same
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = new_tokens;
  auto gen = at::detail::createCPUGenerator(1);
  engine.generate({prompt}, o, gen);  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = engine.generate({prompt}, o, gen);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string ids;
  for (std::int32_t id : out[0].tokens) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  std::printf("{\"tokens_per_s\": %.3f, \"seconds\": %.3f, \"ids\": [%s]}\n", out[0].tokens.size() / s, s, ids.c_str());
  return 0;
}
