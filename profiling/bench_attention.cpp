// bench_attention T LAYERS FORM [THREADS] [CHECKPOINTING]: one forward + backward of a single T-token
// row through L blocks of Qwen3-0.6B's shape (hidden 1024, 16 query heads of 128 on 8 KV heads,
// MLP 3072; a 1024-token vocabulary, so the head's cost stays out of the attention figure),
// float32, with activation checkpointing by default (as a trainer at long context runs).
// FORM: mask (every block through the explicit [1,1,group·T,T] mask, the path before the typed
// attention input) or causal (the causal kernel, no mask: how right-padded rows run now) or spans
// (the same row declared a packed line of one segment: attention per span).
// Prints one JSON line: seconds, peak private memory above the model's (sampled every 5 ms).
#include <cstdio>
#include <cstdlib>
#include <string>

#include <torch/utils.h>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/run/private_memory_peak.hpp"
#include "bench_timing.hpp"

using namespace astraflow;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_attention T LAYERS mask|causal|spans [THREADS] [CHECKPOINTING 0|1]\n");
    return 2;
  }
  const std::int64_t T = std::atoll(argv[1]);
  const int layers = std::atoi(argv[2]);
  const std::string form = argv[3];
  if (form != "mask" && form != "causal" && form != "spans") {
    std::fprintf(stderr, "bench_attention: FORM %s: mask, causal or spans\n", form.c_str());
    return 2;
  }
  torch::set_num_threads(argc > 4 ? std::atoi(argv[4]) : 2);
  const bool checkpointing = argc > 5 ? std::atoi(argv[5]) != 0 : true;
  ModelConfig m;
  m.vocab_size = 1024, m.d_model = 1024, m.layers = layers, m.heads = 16, m.kv_heads = 8, m.head_dim = 128;
  m.ffn_hidden = 3072, m.max_seq_len = T + 1;
  torch::manual_seed(1);
  PolicyModel model(m);
  model->setExplicitMask(form == "mask");
  model->setActivationCheckpointing(checkpointing);
  const auto tokens = torch::randint(1, m.vocab_size, {1, T}, torch::kLong);
  const auto positions = torch::arange(T, torch::kLong).unsqueeze(0);
  const auto valid = torch::ones({1, T}, torch::kBool);
  const Segments segments = form == "spans" ? Segments(torch::zeros({1, T}, torch::kLong)) : Segments();
  const auto before = currentPrivateBytes();
  double seconds = 0;
  std::uint64_t peak = 0;
  {
    PrivateMemoryPeak sampler(std::chrono::milliseconds(5));
    seconds = bench::best(1, [&] { model->hiddenStates(tokens, positions, valid, segments).pow(2).mean().backward(); });
    peak = sampler.peakBytes();
  }
  std::printf(
      "{\"tokens\": %lld, \"layers\": %d, \"form\": \"%s\", \"checkpointing\": %d, \"seconds\": %.3f, "
      "\"peak_bytes_above_model\": %llu, \"attention_form\": %lld}\n",
      static_cast<long long>(T), layers, form.c_str(), checkpointing ? 1 : 0, seconds,
      static_cast<unsigned long long>(peak > before ? peak - before : 0),
      static_cast<long long>(model->attentionInput(positions, valid, segments).form));
  return 0;
}
