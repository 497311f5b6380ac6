#pragma once
// Log-probs of chosen tokens straight from hidden states, a bounded chunk of rows at a time: the
// output projection, log-softmax and gather of each chunk run back to back, so the whole
// [N, vocab] float32 logits tensor (2.5 GB for 4,096 tokens at Qwen3's 151,936) never exists, and
// the backward recomputes each chunk's logits instead of keeping them (the fused linear +
// cross-entropy pattern). Values and gradients equal the unchunked computation.
#include <ATen/core/ivalue.h>
#include <torch/types.h>

namespace astraflow {

// A tied model's embedding and output head are one [V, D] matrix used at both ends of the
// forward; autograd would hold its two [V, D] gradients at once to sum them. Instead the head's
// backward (which runs first) leaves its gradient here, and the embedding's backward adds its rows
// into it and hands the sum on as the matrix's gradient: one [V, D] buffer. One per forward.
// Where the matrix's .grad is there already (ZeRO's gradient buffer, or the sum of an earlier
// micro-batch) and the backward builds no graph, both add into that .grad in place instead and
// hand autograd nothing: no [V, D] buffer at all.
struct TiedGradient : torch::CustomClassHolder {
  torch::Tensor sum;
  bool in_grad = false;  // the head added its gradient into the matrix's .grad itself
};

struct OutputHead {
  torch::Tensor weight;          // [V, D]: the output projection (the embeddings when tied)
  torch::Tensor never_generate;  // [k] int64, optional: vocabulary ids whose logits are −inf
  double temperature = 1.0;      // logits are divided by it before the softmax
  // Set when `weight` is also this forward's embedding, looked up by tiedEmbedding with the same
  // slot: the head's weight gradient then reaches autograd through the embedding's backward.
  c10::intrusive_ptr<TiedGradient> tied = {};
};

// weight[tokens] ([..., D]), the embedding lookup; its backward adds the rows' gradients into
// `tied->sum` (the head's weight gradient, when the head's backward left one) and returns that
// as the weight's gradient.
torch::Tensor tiedEmbedding(const torch::Tensor& weight, const torch::Tensor& tokens,
                            const c10::intrusive_ptr<TiedGradient>& tied);

// Rows per chunk so that one chunk's float32 logits take about `chunk_bytes` (but at least
// kMinChunkRows, or all `rows` if fewer); chunk_bytes 0 means one chunk (the unchunked
// computation, for comparison). The rows are then split into chunks of nearly equal size.
inline constexpr std::int64_t kMinChunkRows = 16;
std::int64_t logitsChunkRows(std::int64_t rows, std::int64_t vocab, std::int64_t chunk_bytes);

// hidden [N, D] (the final norm's output), targets [N] int64 → [N] float32:
// log softmax(hidden · weightᵀ / temperature)[target], computed `chunk_rows` rows at a time in
// float32 (the projection in the weight's dtype, or autocast's). Differentiable in hidden and in
// head.weight; the backward recomputes one chunk's logits at a time under the forward's autocast.
torch::Tensor chunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& targets, const OutputHead& head,
                                   std::int64_t chunk_rows);

}  // namespace astraflow
