#pragma once
// How one optimiser step's sequences go through the model (docs/training.md): split into
// micro-batches by a token budget (trainer.micro_batch_tokens), each laid out padded (one
// sequence per row) or packed (several sequences per row, attention kept within each one:
// trainer.packing).
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "astraflow/model/policy_model.hpp"
#include "astraflow/model/training_sample.hpp"

namespace astraflow {

// The forward input of one micro-batch and where each sequence sits in it.
struct MicroBatch {
  std::vector<std::int64_t> rows;  // the batch rows (sequences) it holds, longest first
  std::int64_t width = 0;          // W: its longest line content; every line is W wide
  std::int64_t lines = 0;          // rows of the forward input (== rows.size() when padded)
  // Laid out in lines (packed, or with shared prefixes; empty: one right-padded row each), per
  // row: its line; where its own tokens start; how many leading tokens it shares with the rows
  // of its group instead (0: none) and where that shared prefix starts. Token t of a row sits at
  // t < shared ? shared_offset + t : offset + t - shared.
  std::vector<std::int64_t> line, offset, shared, shared_offset;
  std::int64_t cells() const { return lines * width; }  // tokens through the forward, padding included
};

// What a batch's rows share (trainer.shared_prefix): each row's group and the number of leading
// tokens every row of that group has in common (a GRPO group's prompt, a multi-turn episode's
// common history). Rows of one group in one micro-batch then go through the forward as a tree:
// the prefix once, each row's remaining tokens after it, attending to the prefix and to their
// own earlier tokens — the same log-probs and gradients as each row alone, to float rounding.
// A group's rows join a tree only while that costs less than laying the next row out alone, by
// `pair_cost`: the cost of one attended (query, key) pair relative to one token through the
// linear layers and the head (attentionPairCost; 0: trees are never split).
struct SharedPrefixes {
  std::vector<std::int64_t> group;   // per batch row
  std::vector<std::int64_t> prefix;  // per batch row: tokens it shares with every row of its group
  double pair_cost = 0;
};
// The FLOPs of one (query, key) pair of attention over those of one token through the model's
// projections, MLP and output head: a line of W cells costs about W + pair_cost × W² tokens.
double attentionPairCost(const ModelConfig& model);
// The pair_cost a trainer of `model` lays trees out with: attentionPairCost under eager
// attention, whose explicit mask makes a line's attention quadratic in its whole width; 0 under
// sdpa, which attends per span (model/attention_input.hpp) — a row then costs the same attention
// in a tree as alone ((prefix + own)² pairs) and P fewer tokens, so trees never split.
double treePairCost(const ModelConfig& model);
// The shared prefixes of a right-padded host batch (tokens [B,T], lengths [B], group_ids [B]),
// with the trainer's pair_cost (attentionPairCost of its model; 0: trees never split).
SharedPrefixes findSharedPrefixes(const torch::Tensor& tokens, const torch::Tensor& lengths,
                                  const torch::Tensor& group_ids, double pair_cost = 0);
// The same for episodes and their groups (one each), before collation.
SharedPrefixes findSharedPrefixes(const std::vector<TrainingSample>& episodes, const std::vector<std::int64_t>& groups,
                                  double pair_cost = 0);

// `rows` (indices into `lengths`) split into micro-batches whose forward input holds at most
// `budget` tokens (lines × longest), longest sequences first. Packed, sequences go first-fit
// into lines as wide as the micro-batch's longest. With `shared`, the rows of a group that share
// a prefix form one unit (a tree) that is never split between micro-batches or lines, and the
// units go first-fit into lines whether or not `packed` (trees vary in size too much to pad). A unit
// longer than the budget goes alone. budget 0: one micro-batch.
std::vector<MicroBatch> planMicroBatches(const std::vector<std::int64_t>& rows,
                                         const std::vector<std::int64_t>& lengths, std::int64_t budget, bool packed,
                                         const SharedPrefixes* shared = nullptr);

// Log-probs of a micro-batch's sequences, laid out as the right-padded [n, W] block of its rows
// (n = rows.size()): entry t of sequence i is log π(tokens[i][t] | tokens[i][<t]) under
// logits / temperature; 0 at t = 0 and past the sequence. `tokens` / `lengths` are the whole
// batch's ([B,T] right-padded, [B]) on the model's device. Packed, the sequences of a line
// attend only within themselves and their positions start at 0: the same values as padded, to
// float rounding; so are rows laid out after a shared prefix.
torch::Tensor microBatchLogProbs(PolicyModelImpl& model, const MicroBatch& micro, const torch::Tensor& tokens,
                                 const torch::Tensor& lengths, double temperature);

// The order in which a PPO pass starting at optimiser step `step` visits a batch of `rows`
// sequences; trainer.mini_batches cuts it into near-equal consecutive slices. Drawn from the step
// count alone, so a resumed run visits what the uninterrupted one would.
std::vector<std::int64_t> miniBatchOrder(std::int64_t rows, std::int64_t step);

// rows as an int64 tensor on `device` (for index_select).
torch::Tensor rowIndex(const std::vector<std::int64_t>& rows, const torch::Device& device);

}  // namespace astraflow
