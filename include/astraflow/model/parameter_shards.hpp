#pragma once
// Where a parameter-sharded trainer (trainer.sharding: parameters; trainer/zero_optimizer.hpp)
// keeps the transformer blocks' weights. Each rank holds one slice of every block; the model
// asks for a block's full weights just before running it and hands them back right after, so a
// rank holds one block whole at a time. The embeddings, final norm and output head stay whole.
#include <torch/types.h>

#include <cstddef>
#include <vector>

namespace astraflow {

class ParameterShards {
 public:
  virtual ~ParameterShards() = default;
  // Collective over the trainer group. gather makes blockParameters(layer) hold their full
  // values; release sets them back to empty placeholders.
  virtual void gather(std::size_t layer) = 0;
  virtual void release(std::size_t layer) = 0;
  // The gradients of blockParameters(layer), in that order (undefined: zero), summed over the
  // group into each rank's slice. Collective.
  virtual void reduceGradients(std::size_t layer, const std::vector<torch::Tensor>& grads) = 0;
  // Parameter `index` (orderedParameters() order) takes the full value `value`: each rank
  // keeps its slice. Local, no communication: every rank loads the same values.
  virtual void load(std::size_t index, const torch::Tensor& value) = 0;
};

}  // namespace astraflow
