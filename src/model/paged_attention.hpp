#pragma once
// Decode attention straight over the continuous engine's KV block pool on the CPU: each row's
// one new query against its keys where they lie in the pool, without gathering them into a
// dense [B,K] copy first (paged_attention.cpp says why).
#include <torch/torch.h>

namespace astraflow {

// Whether pagedDecodeAttention serves a forward of `positions_per_row` new positions with KV
// pool tensors like `keys`: one position per row, on the CPU, in float32 or bf16.
bool pagedDecodeAttentionApplies(const torch::Tensor& keys, std::int64_t positions_per_row);

// q [B,H,hd] (after rotary), keys/values [slots,KV,hd] (one layer of the pool), read_slots
// [B,K] int64 (the pool slot of each of row b's keys), allowed [B,K] bool (which of them the
// query sees). Query head i attends with KV head i / (H / KV), as the model's grouped heads do.
// Returns softmax(q·kᵀ·scale)·v as [B,H,hd] in q's dtype, computed in float32. A row that sees
// no key gets zeros (the scheduler never asks for one: a row always sees its position 0).
torch::Tensor pagedDecodeAttention(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                                   const torch::Tensor& read_slots, const torch::Tensor& allowed, double scale);

}  // namespace astraflow
