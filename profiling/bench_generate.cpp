// bench_generate — generation throughput, side by side in one run: with and without the KV
// cache, SDPA against eager attention, and bf16 against fp32 weights (model.attention,
// rollout.precision).
//
//   build/bin/bench_generate [batch] [new_tokens] [d_model] [layers]
//
// Samples `new_tokens` tokens for `batch` prompts of 8 tokens (no stop token, so every row
// runs to the end) with a randomly initialised policy (the same weights in every variant) and
// prints generated tokens/s of each and the ratios.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "astraflow/rollout/generation.hpp"

using namespace astraflow;

namespace {

double tokensPerSecond(GenerationEngine& engine, const std::vector<std::vector<std::int32_t>>& prompts,
                       SamplingOptions o, int repeats) {
  auto gen = at::detail::createCPUGenerator(1);
  engine.generate(prompts, o, gen);  // warm-up
  std::size_t tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (const auto& g : engine.generate(prompts, o, gen)) tokens += g.tokens.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return tokens / s;
}

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 64;
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 48;
  ModelConfig m;
  m.vocab_size = 66;
  m.d_model = argc > 3 ? std::atoi(argv[3]) : 64;
  m.layers = argc > 4 ? std::atoi(argv[4]) : 2;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = m.d_model * 11 / 4;
  m.max_seq_len = 8 + new_tokens;
  torch::set_num_threads(1);
  torch::manual_seed(1);
  PolicyModel model(m);
  model->eval();
  GenerationEngine engine(model, 0);
  std::vector<std::vector<std::int32_t>> prompts(batch, std::vector<std::int32_t>{1, 10, 11, 12, 13, 14, 15, 16});
  SamplingOptions o;
  o.max_new_tokens = new_tokens;
  // The same weights with eager attention, and in bf16.
  ModelConfig me = m;
  me.attention = AttentionKind::Eager;
  PolicyModel eager(me);
  eager->importTensors(model->orderedParameters());
  eager->eval();
  GenerationEngine eager_engine(eager, 0);
  PolicyModel bf16(m);
  bf16->importTensors(model->orderedParameters());
  bf16->place(torch::kCPU, torch::kBFloat16);
  bf16->eval();
  GenerationEngine bf16_engine(bf16, 0);

  const double cached = tokensPerSecond(engine, prompts, o, 3);
  const double cached_eager = tokensPerSecond(eager_engine, prompts, o, 3);
  const double cached_bf16 = tokensPerSecond(bf16_engine, prompts, o, 3);
  o.use_kv_cache = false;
  const double full = tokensPerSecond(engine, prompts, o, 1);
  std::printf("bench_generate: batch %d, prompt 8, %d new tokens, d_model %d, layers %d, %lld parameters, 1 thread\n",
              batch, new_tokens, m.d_model, m.layers, static_cast<long long>(model->parameterCount()));
  std::printf("%-34s %12.0f tokens/s\n", "with KV cache (sdpa, fp32)", cached);
  std::printf("%-34s %12.0f tokens/s\n", "with KV cache, eager attention", cached_eager);
  std::printf("%-34s %12.0f tokens/s\n", "with KV cache, bf16 weights", cached_bf16);
  std::printf("%-34s %12.0f tokens/s\n", "full forward per step", full);
  std::printf("%-34s %12.2f\n%-34s %12.2f\n%-34s %12.2f\n", "ratio (cache / full)", cached / full,
              "ratio (sdpa / eager)", cached / cached_eager, "ratio (bf16 / fp32), CPU", cached_bf16 / cached);
  return 0;
}
