#pragma once
// How a forward's queries see its keys, decided once per forward and handed to every block: the
// typed attention input. A full causal forward over right-padded rows needs no mask at all; packed
// rows and rows with padding in front are attended per span (one causal call per sequence);
// an explicit [B,1,group·T,K] mask — quadratic in length, and it rules out the fused kernels —
// is left for what nothing else serves: the KV-cache forwards and eager attention.
//
// Memory at Qwen3-8B's shape (4 query heads per KV head), one 32k-token row: the mask alone is
// 4·32768² bytes = 4 GiB (and SDPA may widen it to float); Causal and Spans hold O(T) beyond
// q, k, v, as the fused kernels keep only a log-sum-exp per query.
#include <torch/types.h>

#include <cstdint>

namespace astraflow {

enum class AttentionForm : std::int64_t {
  Causal,        // every row right-padded (or full): SDPA is_causal, no mask; padding queries come last
  Spans,         // one causal attention per span (spans below); cells outside every span give 0
  Mask,          // `mask`: [B,1,group·T,K] bool, or additive float for eager attention
  PagedInPlace,  // a one-position paged step over the pool in place: `mask` is [B,K] bool
};

struct AttentionInput {
  AttentionForm form = AttentionForm::Mask;
  torch::Tensor mask;
  // Spans: [S,5] int64 on the host, one row per sequence: line, start, length, and the span it
  // also sees (a shared prompt laid out once before its responses): start, length (0: none).
  // A span's queries see its own earlier cells and every cell of the span it sees.
  torch::Tensor spans;
};

// Spans from a packed layout (Segments: id [B,T], sees [B,T] or undefined) or, with `id`
// undefined, from validity alone (each row's valid cells one span). Undefined when a segment is
// not one contiguous run of valid cells, or sees a segment not in its line (the mask serves then).
torch::Tensor attentionSpans(const torch::Tensor& valid, const torch::Tensor& id, const torch::Tensor& sees);

// Whether every row of `valid` [B,T] is a run of valid cells from cell 0 (right padding only).
bool rightPadded(const torch::Tensor& valid);

// Attention per span: q [B,H,T,hd], k and v [B,KV,T,hd] → [B,H,T,hd], 0 outside every span.
torch::Tensor spanAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& spans, double scale);

}  // namespace astraflow
