// Decode attention over the KV block pool, for the CPU engine.
//
// Why a kernel: the generic paged path (policy_model.cpp) gathers every row's keys and values
// out of the pool into dense [B,KV,K,hd] tensors for each layer and step, and builds a [B,group,K]
// mask, before scaled_dot_product_attention reads them again. At decode (one query per row)
// attention is all memory traffic, so that copy is paid on top of the one read the math needs:
// at batch 64 of the Qwen3-0.6B shape it cost the engine its lead over transformers' dense
// cache (docs/performance.md). Here each (row, KV head) reads its keys and values once, in place.
//
// The inner loops are plain C++ made vectorisable by `omp simd` (-fopenmp-simd, no OpenMP
// runtime) and compiled for AVX-512, AVX2 and baseline x86-64 by GCC's target_clones, picked
// once at load by the CPU that runs it: one binary serves any cluster node.
#include "model/paged_attention.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "astraflow/core/error.hpp"

namespace astraflow {
namespace {

struct Problem {
  const void* q;
  const void* keys;
  const void* values;
  float* out;  // [B,H,hd] float32
  const std::int64_t* slots;
  const bool* allowed;
  std::int64_t K, H, KV, hd, group;
  float scale;
};

inline float toFloat(float x) { return x; }
inline float toFloat(c10::BFloat16 x) { return static_cast<float>(x); }

// One row's `group` query heads against KV head `kvh`. scores: group × K floats, acc: group × hd.
template <typename T>
inline __attribute__((always_inline)) void attendOne(const Problem& p, std::int64_t item, std::vector<float>& qf,
                                                     std::vector<float>& scores, std::vector<std::int64_t>& keys) {
  const std::int64_t b = item / p.KV, kvh = item % p.KV, hd = p.hd, group = p.group;
  const T* q = static_cast<const T*>(p.q) + (b * p.H + kvh * group) * hd;
  const T* key_base = static_cast<const T*>(p.keys);
  const T* value_base = static_cast<const T*>(p.values);
  float* out = p.out + (b * p.H + kvh * group) * hd;

  // The keys this row sees, as element offsets of their rows for this KV head.
  std::int64_t n = 0;
  for (std::int64_t k = 0; k < p.K; ++k) {
    if (p.allowed[b * p.K + k]) keys[static_cast<std::size_t>(n++)] = (p.slots[b * p.K + k] * p.KV + kvh) * hd;
  }
  if (n == 0) {
    std::fill(out, out + group * hd, 0.0f);
    return;
  }
  for (std::int64_t i = 0; i < group * hd; ++i) qf[static_cast<std::size_t>(i)] = toFloat(q[i]) * p.scale;

  // Scores: each key row is read once for all the heads that share it.
  for (std::int64_t j = 0; j < n; ++j) {
    const T* kr = key_base + keys[static_cast<std::size_t>(j)];
    for (std::int64_t g = 0; g < group; ++g) {
      const float* qg = qf.data() + g * hd;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (std::int64_t d = 0; d < hd; ++d) s += qg[d] * toFloat(kr[d]);
      scores[static_cast<std::size_t>(g * n + j)] = s;
    }
  }
  // Softmax per head, left unnormalised until the end.
  std::vector<float> sums(static_cast<std::size_t>(group));
  for (std::int64_t g = 0; g < group; ++g) {
    float* sg = scores.data() + g * n;
    const float m = *std::max_element(sg, sg + n);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < n; ++j) {
      sg[j] = std::exp(sg[j] - m);
      sum += sg[j];
    }
    sums[static_cast<std::size_t>(g)] = sum;
  }
  std::fill(out, out + group * hd, 0.0f);
  for (std::int64_t j = 0; j < n; ++j) {
    const T* vr = value_base + keys[static_cast<std::size_t>(j)];
    for (std::int64_t g = 0; g < group; ++g) {
      const float w = scores[static_cast<std::size_t>(g * n + j)];
      float* og = out + g * hd;
#pragma omp simd
      for (std::int64_t d = 0; d < hd; ++d) og[d] += w * toFloat(vr[d]);
    }
  }
  for (std::int64_t g = 0; g < group; ++g) {
    const float inv = 1.0f / sums[static_cast<std::size_t>(g)];
    float* og = out + g * hd;
#pragma omp simd
    for (std::int64_t d = 0; d < hd; ++d) og[d] *= inv;
  }
}

template <typename T>
inline __attribute__((always_inline)) void attendRange(const Problem& p, std::int64_t begin, std::int64_t end) {
  std::vector<float> qf(static_cast<std::size_t>(p.group * p.hd));
  std::vector<float> scores(static_cast<std::size_t>(p.group * p.K));
  std::vector<std::int64_t> keys(static_cast<std::size_t>(p.K));
  for (std::int64_t item = begin; item < end; ++item) attendOne<T>(p, item, qf, scores, keys);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void attendRangeF32(const Problem& p, std::int64_t begin,
                                                                                 std::int64_t end) {
  attendRange<float>(p, begin, end);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void attendRangeBf16(const Problem& p, std::int64_t begin,
                                                                                  std::int64_t end) {
  attendRange<c10::BFloat16>(p, begin, end);
}

}  // namespace

bool pagedDecodeAttentionApplies(const torch::Tensor& keys, std::int64_t positions_per_row) {
  return positions_per_row == 1 && keys.device().is_cpu() &&
         (keys.scalar_type() == torch::kFloat32 || keys.scalar_type() == torch::kBFloat16);
}

torch::Tensor pagedDecodeAttention(const torch::Tensor& q_in, const torch::Tensor& keys, const torch::Tensor& values,
                                   const torch::Tensor& read_slots_in, const torch::Tensor& allowed_in, double scale) {
  if (!pagedDecodeAttentionApplies(keys, 1) || q_in.scalar_type() != keys.scalar_type() ||
      values.scalar_type() != keys.scalar_type() || q_in.dim() != 3 || keys.dim() != 3 ||
      !keys.sizes().equals(values.sizes()) || q_in.size(2) != keys.size(2) || q_in.size(1) % keys.size(1) != 0) {
    throw Error("model: pagedDecodeAttention takes q [B,H,hd] and a CPU float32/bf16 pool [slots,KV,hd] of one dtype");
  }
  const auto q = q_in.contiguous();
  const auto read_slots = read_slots_in.to(torch::kLong).contiguous();
  const auto allowed = allowed_in.to(torch::kBool).contiguous();
  const std::int64_t B = q.size(0), H = q.size(1), hd = q.size(2), KV = keys.size(1);
  if (read_slots.dim() != 2 || read_slots.size(0) != B || !allowed.sizes().equals(read_slots.sizes())) {
    throw Error("model: pagedDecodeAttention's read_slots and allowed must both be [B,K]");
  }
  if (!keys.is_contiguous() || !values.is_contiguous()) {
    throw Error("model: pagedDecodeAttention reads the pool in place and needs it contiguous");
  }
  auto out = torch::empty({B, H, hd}, q.options().dtype(torch::kFloat32));
  const Problem p{q.data_ptr(),
                  keys.data_ptr(),
                  values.data_ptr(),
                  out.data_ptr<float>(),
                  read_slots.data_ptr<std::int64_t>(),
                  allowed.data_ptr<bool>(),
                  read_slots.size(1),
                  H,
                  KV,
                  hd,
                  H / KV,
                  static_cast<float>(scale)};
  const bool bf16 = keys.scalar_type() == torch::kBFloat16;
  // One work item is a row's KV head: a few kilobytes of keys per position, so a handful per task.
  at::parallel_for(0, B * KV, 1, [&](std::int64_t begin, std::int64_t end) {
    if (bf16) {
      attendRangeBf16(p, begin, end);
    } else {
      attendRangeF32(p, begin, end);
    }
  });
  return bf16 ? out.to(torch::kBFloat16) : out;
}

}  // namespace astraflow
