#pragma once
// How one optimiser step's sequences go through the model (docs/training.md): split into
// micro-batches by a token budget (trainer.micro_batch_tokens), each laid out padded (one
// sequence per row) or packed (several sequences per row, attention kept within each one:
// trainer.packing).
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

// The forward input of one micro-batch and where each sequence sits in it.
struct MicroBatch {
  std::vector<std::int64_t> rows;  // the batch rows (sequences) it holds, longest first
  std::int64_t width = 0;          // W: its longest sequence; every line is W wide
  std::int64_t lines = 0;          // rows of the forward input (== rows.size() when padded)
  // Packed only: line and offset of each sequence (rows order).
  std::vector<std::int64_t> line, offset;
  std::int64_t cells() const { return lines * width; }  // tokens through the forward, padding included
};

// `rows` (indices into `lengths`) split into micro-batches whose forward input holds at most
// `budget` tokens (lines × longest), longest sequences first. Packed, sequences go first-fit
// into lines as wide as the micro-batch's longest. A sequence longer than the budget goes alone.
// budget 0: one micro-batch.
std::vector<MicroBatch> planMicroBatches(const std::vector<std::int64_t>& rows,
                                         const std::vector<std::int64_t>& lengths, std::int64_t budget, bool packed);

// Log-probs of a micro-batch's sequences, laid out as the right-padded [n, W] block of its rows
// (n = rows.size()): entry t of sequence i is log π(tokens[i][t] | tokens[i][<t]) under
// logits / temperature; 0 at t = 0 and past the sequence. `tokens` / `lengths` are the whole
// batch's ([B,T] right-padded, [B]) on the model's device. Packed, the sequences of a line
// attend only within themselves and their positions start at 0: the same values as padded, to
// float rounding.
torch::Tensor microBatchLogProbs(PolicyModelImpl& model, const MicroBatch& micro, const torch::Tensor& tokens,
                                 const torch::Tensor& lengths, double temperature);

// The order in which a PPO pass starting at optimiser step `step` visits a batch of `rows`
// sequences; trainer.mini_batches cuts it into near-equal consecutive slices. Drawn from the step
// count alone, so a resumed run visits what the uninterrupted one would.
std::vector<std::int64_t> miniBatchOrder(std::int64_t rows, std::int64_t step);

// rows as an int64 tensor on `device` (for index_select).
torch::Tensor rowIndex(const std::vector<std::int64_t>& rows, const torch::Device& device);

}  // namespace astraflow
