// bench_hf_generate FOLDER [new_tokens] [threads] [prompt_tokens] [batch] [fp32|bf16]: greedy generation
// from a Hugging Face folder on the continuous engine, `batch` rows together (row r's prompt is
// 100 + (7i + r) mod 150, ids the folder's tokenizer has), the way a rollout rank generates; prints one JSON line
// {"tokens_per_s", "seconds", "in_place_seconds", "in_place_same_ids", "prepacked_seconds", "prepacked_same_ids",
// "ids":
// [[row 0], ...]}: the engine as it runs by default, with its decode attention always in place over the KV pool
// (in_place_*), and with its weights packed for MKL's GEMM (packed_*, rollout.prepacked_weights: true).
// profiling/bench_hf_generate.sh runs transformers' generate and CTranslate2 on the same folder, prompts and threads
// beside it, checks the greedy continuations agree and prints the ratios.
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
    std::fprintf(stderr,
                 "usage: bench_hf_generate FOLDER [new_tokens] [threads] [prompt_tokens] [batch] [fp32|bf16]\n");
    return 2;
  }
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 32;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int prompt_tokens = argc > 4 ? std::atoi(argv[4]) : 16;
  const int batch = argc > 5 ? std::atoi(argv[5]) : 1;
  // bf16: the weights (and KV cache) in bf16, as a rollout rank computing from its node's shared
  // copy in place runs (rollout.precision: bf16); fp32 (the default): converted, as `auto` on the CPU.
  const bool bf16 = argc > 6 && std::string(argv[6]) == "bf16";
  torch::set_num_threads(threads);
  ModelConfig m = readHfModelConfig(argv[1]).model;
  m.max_seq_len = prompt_tokens + new_tokens;
  PolicyModel model(m);
  loadHfWeights(*model, argv[1]);
  if (bf16) model->place(torch::kCPU, torch::kBFloat16);
  model->eval();
  GenerationEngine engine(model, 0);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(batch));
  for (int r = 0; r < batch; ++r) {
    for (int i = 0; i < prompt_tokens; ++i) prompts[static_cast<std::size_t>(r)].push_back(100 + (7 * i + r) % 150);
  }  // the script gives transformers and CTranslate2 the same
  SamplingOptions o;
  o.greedy = true;
  o.max_new_tokens = new_tokens;
  auto gen = at::detail::createCPUGenerator(1);
  // The engine as it runs by default (here, rows of one length: keys gathered into a dense copy
  // for the decode attention), then with the decode attention always in place over the KV pool,
  // side by side: each warmed up once and timed once.
  auto timed = [&](bool always_in_place, bool packed, double& seconds) {
    model->setInPlacePagedDecode(true, always_in_place);
    model->setPrepackedWeights(packed);
    engine.generate(prompts, o, gen);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    auto result = engine.generate(prompts, o, gen);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  };
  double s = 0, in_place_s = 0, packed_s = 0;
  const auto out = timed(false, false, s);
  const auto in_place = timed(true, false, in_place_s);
  const auto packed = timed(false, true, packed_s);
  auto same_ids = [&](const std::vector<Generation>& other) {
    bool same = other.size() == out.size();
    for (std::size_t r = 0; same && r < out.size(); ++r) same = other[r].tokens == out[r].tokens;
    return same ? "true" : "false";
  };
  std::string ids;
  std::size_t tokens = 0;
  for (const auto& g : out) {
    std::string row;
    for (std::int32_t id : g.tokens) row += (row.empty() ? "" : ", ") + std::to_string(id);
    ids += (ids.empty() ? "[" : ", [") + row + "]";
    tokens += g.tokens.size();
  }
  std::printf(
      "{\"tokens_per_s\": %.3f, \"seconds\": %.3f, \"in_place_seconds\": %.3f, \"in_place_same_ids\": %s, "
      "\"prepacked_seconds\": %.3f, \"prepacked_same_ids\": %s, \"ids\": [%s]}\n",
      tokens / s, s, in_place_s, same_ids(in_place), packed_s, same_ids(packed), ids.c_str());
  return 0;
}
