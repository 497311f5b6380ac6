// sampleRows on the CPU in float32: one pass over each row's logits from memory, the rest in cache.
//
// Why: the tensor path (token_sampler.cpp) makes about ten passes over the [B,V] logits — scale,
// NaN and +inf checks, a where, log-softmax, a row gather, the argmax or a float64 cumulative
// sum — each a fresh [B,V] tensor. At batch 64 of a 151,936-token vocabulary that is 39 MB a pass
// and measured ~90 ms a step, a sixth of a Qwen3-0.6B decode step on this machine
// (docs/performance.md). Here each row is read once into a per-thread buffer (scaled, masked),
// and its maximum, normaliser and draw are computed there. Same distribution, same inverse-CDF
// rule (float64 cumulation), so a row's token depends on its logits and its draw only.
#include <ATen/Parallel.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "astraflow/core/error.hpp"
#include "rollout/token_sampler.hpp"

namespace astraflow::engine_detail {
namespace {

// exp(x) for x ≤ 0 in plain arithmetic the compiler vectorises (std::exp is a scalar libm call
// here): x = n·ln2 + r with |r| ≤ ln2/2, e^r by its Taylor polynomial to r⁶ (relative error
// under 2e-7), 2ⁿ built in the exponent bits. Below −87 it is 0, as expf's result nearly is.
inline float expNonPositive(float x) {
  const float lo = -87.0f;
  const bool under = x < lo;
  x = under ? lo : x;
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split: exact high part, small low part
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return under ? 0.0f : p * scale;
}

// One row: buf holds its scaled, masked logits on entry and its unnormalised probabilities after.
__attribute__((target_clones("avx512f", "avx2", "default"))) SampledToken sampleOne(float* buf, std::int64_t V,
                                                                                    bool greedy, double uniform) {
  // Maximum (first index of it) and the finiteness check: NaN or +inf anywhere is not a
  // distribution; neither is a row every token of which is masked.
  const float inf = std::numeric_limits<float>::infinity();
  float m = -inf;
  int bad = 0;
#pragma omp simd reduction(max : m) reduction(| : bad)
  for (std::int64_t i = 0; i < V; ++i) {
    const float v = buf[i];
    bad |= static_cast<int>(v != v) | static_cast<int>(v == inf);
    m = v > m ? v : m;
  }
  if (bad != 0 || m == -inf) return {0, 0.0f, false};
  std::int64_t arg = 0;
  while (buf[arg] != m) ++arg;  // the first index of the maximum, as argmax picks
#pragma omp simd
  for (std::int64_t i = 0; i < V; ++i) buf[i] = expNonPositive(buf[i] - m);
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (std::int64_t i = 0; i < V; ++i) total += buf[i];
  const float log_total = static_cast<float>(std::log(total));
  if (greedy) return {static_cast<std::int32_t>(arg), -log_total, true};  // its logit is the maximum
  // Inverse CDF: the first index whose cumulative mass passes u · total, found a block at a time.
  const double target = uniform * total;
  constexpr std::int64_t kBlock = 64;
  double cum = 0.0;
  std::int64_t i = 0;
  for (; i + kBlock <= V; i += kBlock) {
    double block = 0.0;
#pragma omp simd reduction(+ : block)
    for (std::int64_t j = 0; j < kBlock; ++j) block += buf[i + j];
    if (cum + block > target) break;
    cum += block;
  }
  std::int64_t pick = V - 1;
  for (; i < V; ++i) {
    cum += buf[i];
    if (cum > target) {
      pick = i;
      break;
    }
  }
  // A token of probability 0 is never picked: the cumulative sum does not pass anything there.
  while (pick > 0 && buf[pick] == 0.0f) --pick;
  const float logp = std::log(buf[pick]) - log_total;
  return {static_cast<std::int32_t>(pick), logp, true};
}

}  // namespace

bool cpuSamplingApplies(const torch::Tensor& logits) {
  return logits.device().is_cpu() && logits.scalar_type() == torch::kFloat32 && logits.dim() == 2;
}

std::vector<SampledToken> sampleRowsOnCpu(const torch::Tensor& logits_in, const std::vector<RowSampling>& rows) {
  if (!cpuSamplingApplies(logits_in) || logits_in.size(0) != static_cast<std::int64_t>(rows.size())) {
    throw Error("rollout: sampleRowsOnCpu takes [B,V] float32 CPU logits and one RowSampling per row");
  }
  for (const auto& r : rows) {
    if (!r.greedy && r.top_p < 1.0) throw Error("rollout: sampleRowsOnCpu does not take top-p rows (sampleRows does)");
  }
  const auto logits = logits_in.contiguous();
  const std::int64_t B = logits.size(0), V = logits.size(1);
  const float* data = logits.data_ptr<float>();
  std::vector<SampledToken> out(rows.size());
  at::parallel_for(0, B, 1, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<std::size_t>(V));
    for (std::int64_t b = begin; b < end; ++b) {
      const RowSampling& r = rows[static_cast<std::size_t>(b)];
      const float* src = data + b * V;
      // Scaled as the tensor path scales: by the float32 temperature (1 for greedy rows).
      const float t = r.greedy ? 1.0f : static_cast<float>(r.temperature);
      if (t == 1.0f) {
        std::memcpy(buf.data(), src, static_cast<std::size_t>(V) * sizeof(float));
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < V; ++i) buf[static_cast<std::size_t>(i)] = src[i] / t;
      }
      if (r.masked) {
        for (const std::int32_t id : *r.masked) {
          if (id < 0 || id >= V) throw Error("rollout: a masked token id is outside the vocabulary");
          buf[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
      }
      out[static_cast<std::size_t>(b)] = sampleOne(buf.data(), V, r.greedy, r.uniform);
    }
  });
  return out;
}

}  // namespace astraflow::engine_detail
