// bench_long_tail — the continuous engine against the static batch engine it replaced, side
// by side in one run, on long-tailed response lengths (docs/performance.md, "Continuous
// batching on a long tail"), and a group's shared prompt against separate prompts.
//
//   build/bin/bench_long_tail [sequences=128] [running=16] [d_model=96] [layers=3] [cap=2048] [threads=2] [reps=3]
//
// Lengths are lognormal with median 64 tokens and 1 % past 1,024 (capped at `cap`); no stop
// token, so each sequence generates exactly its length. Static: the sequences in batches of
// `running`, each batch stepped until its longest ends (one generateStatic call per batch, as a
// rollout rank did). Continuous: all submitted to one SequenceScheduler with max_running =
// `running`, a sequence admitted as soon as one ends, run with the decode attention over keys
// gathered into a dense copy and in place over the KV pool. Random weights, 16-token prompts.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "astraflow/rollout/generation.hpp"
#include "astraflow/rollout/sequence_scheduler.hpp"

using namespace astraflow;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::int32_t> promptOf(int i, int length) {
  std::vector<std::int32_t> p{1};
  for (int k = 1; k < length; ++k) p.push_back(2 + (i * 131 + k * 17) % 500);
  return p;
}

// Prefill of a group of `group` sequences of one `length`-token prompt (shared) or of `group`
// different prompts: seconds and peak KV bytes (one new token each, so prefill is the work).
std::pair<double, std::int64_t> prefillGroup(PolicyModel& model, int group, int length, bool shared) {
  SequenceScheduler s(model, 0, {group, 0, 16, std::int64_t{1} << 40});
  for (int i = 0; i < group; ++i) {
    SequenceRequest r;
    r.prompt = promptOf(shared ? 0 : i, length);
    r.options.max_new_tokens = 1;
    r.seed = static_cast<std::uint64_t>(i);
    s.submit(std::move(r));
  }
  const double t0 = now();
  while (!s.idle()) s.step();
  return {now() - t0, s.counters().peak_kv_bytes};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 128;
  const int running = argc > 2 ? std::atoi(argv[2]) : 16;
  const int cap = argc > 5 ? std::atoi(argv[5]) : 2048;
  const int reps = argc > 7 ? std::max(1, std::atoi(argv[7])) : 3;
  ModelConfig m;
  m.vocab_size = 512;
  m.d_model = argc > 3 ? std::atoi(argv[3]) : 96;
  m.layers = argc > 4 ? std::atoi(argv[4]) : 3;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = m.d_model * 8 / 3;
  m.max_seq_len = 16 + cap;
  torch::set_num_threads(argc > 6 ? std::atoi(argv[6]) : 2);
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  PolicyModel model(m);
  model->eval();

  // Median 64: mu = ln 64; 1 % past 1,024: sigma = ln 16 / 2.326.
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> length(std::log(64.0), std::log(16.0) / 2.326);
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<int> lengths;
  long long total = 0;
  for (int i = 0; i < n; ++i) {
    lengths.push_back(std::clamp(static_cast<int>(std::lround(length(rng))), 1, cap));
    prompts.push_back(promptOf(i, 16));
    total += lengths.back();
  }
  std::vector<int> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  std::printf("%d sequences, %lld tokens: median %d, p99 %d, longest %d; %d running; model d=%d layers=%d\n", n, total,
              sorted[sorted.size() / 2], sorted[sorted.size() * 99 / 100], sorted.back(), running, m.d_model, m.layers);

  GenerationEngine engine(model, 0);
  SamplingOptions o;
  o.max_new_tokens = cap;
  auto gen = at::detail::createCPUGenerator(1);
  long long row_steps = 0;
  double t0 = now();
  for (int start = 0; start < n; start += running) {
    const int end = std::min(n, start + running);
    std::vector<std::vector<std::int32_t>> batch(prompts.begin() + start, prompts.begin() + end);
    RowControl control;
    control.max_new_tokens.assign(lengths.begin() + start, lengths.begin() + end);
    const int longest = *std::max_element(control.max_new_tokens.begin(), control.max_new_tokens.end());
    row_steps += static_cast<long long>(end - start) * longest;
    engine.generateStatic(batch, o, gen, control);
  }
  const double t_static = now() - t0;

  // The continuous engine twice: decode attention always over keys gathered into a dense copy
  // (as the engine first did, and as CUDA does), then as it runs by default on the CPU (in place
  // over the KV pool at the steps where most of the gathered keys would be padding).
  struct Continuous {
    double seconds = 0;
    long long generated = 0;
    SchedulerCounters counters;
  };
  auto continuous = [&](bool in_place) {
    model->setInPlacePagedDecode(in_place);  // on: in place when most gathered keys would be padding
    SequenceScheduler scheduler(model, 0, {running, 0, 16, 4096});
    for (int i = 0; i < n; ++i) {
      SequenceRequest r;
      r.prompt = prompts[static_cast<std::size_t>(i)];
      r.options.max_new_tokens = lengths[static_cast<std::size_t>(i)];
      r.seed = static_cast<std::uint64_t>(i);
      scheduler.submit(std::move(r));
    }
    Continuous out;
    const double start = now();
    while (!scheduler.idle()) {
      for (const auto& f : scheduler.step()) out.generated += static_cast<long long>(f.generation.tokens.size());
    }
    out.seconds = now() - start;
    out.counters = scheduler.counters();
    return out;
  };
  // Alternated, best of `reps` each: one run of either varies by ±10 % on a shared 2-core machine.
  Continuous gathered = continuous(false), in_place = continuous(true);
  for (int r = 1; r < reps; ++r) {
    const auto g = continuous(false), p = continuous(true);
    if (g.seconds < gathered.seconds) gathered = g;
    if (p.seconds < in_place.seconds) in_place = p;
  }
  const double t_cont = in_place.seconds;
  const long long generated = std::min(in_place.generated, gathered.generated);
  const auto& c = in_place.counters;
  std::printf("static     %8.2f s  %8.1f tokens/s  (%lld row-steps for %lld tokens: %.0f %% padding)\n", t_static,
              total / t_static, row_steps, total, 100.0 * (1.0 - static_cast<double>(total) / row_steps));
  std::printf("continuous, gathered KV %8.2f s  %8.1f tokens/s\n", gathered.seconds,
              gathered.generated / gathered.seconds);
  std::printf("continuous %8.2f s  %8.1f tokens/s  (%llu decode rows, %llu forwards, peak KV %.1f MiB of %.1f MiB)\n",
              t_cont, in_place.generated / t_cont, static_cast<unsigned long long>(c.decode_tokens),
              static_cast<unsigned long long>(c.decode_forwards + c.prefill_forwards), c.peak_kv_bytes / 1048576.0,
              c.kv_pool_bytes / 1048576.0);
  std::printf("continuous / static speed: %.2fx; default / always gathered KV: %.2fx\n", t_static / t_cont,
              gathered.seconds / t_cont);
  if (generated != total) {
    std::printf("FAILED: generated %lld of %lld tokens\n", generated, total);
    return 1;
  }

  const int prompt_len = std::min(512, cap);
  prefillGroup(model, 8, prompt_len, true);  // warm-up
  const auto [t_shared, kv_shared] = prefillGroup(model, 8, prompt_len, true);
  const auto [t_sep, kv_sep] = prefillGroup(model, 8, prompt_len, false);
  std::printf(
      "group of 8, %d-token prompt: shared %.3f s %.2f MiB KV, separate %.3f s %.2f MiB KV: %.2fx time, %.2fx KV\n",
      prompt_len, t_shared, kv_shared / 1048576.0, t_sep, kv_sep / 1048576.0, t_shared / t_sep,
      static_cast<double>(kv_shared) / static_cast<double>(kv_sep));
  return 0;
}
