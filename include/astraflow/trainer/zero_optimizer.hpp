#pragma once
// ZeRO stage 1 over a data-parallel trainer group (trainer.sharding: optimizer; docs/training.md).
// The parameters are laid end to end in one flat buffer (the model's parameters become views of
// it; their gradients views of a second one), cut into equal shards, one per rank. Each rank
// keeps AdamW's state for its shard alone: after the backward, the gradients are reduce-scattered
// (each rank receives the group's mean of its shard), the norm and finiteness are agreed over the
// group, AdamW steps the shard, and the updated shards are all-gathered into every rank's weights.
// The collectives go over trainer.grad_sync's transport (trainer/group_collectives.hpp).
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/trainer/group_collectives.hpp"

namespace astraflow {

class ZeroOptimizer {
 public:
  // Collective over `group`. The model must be placed (device and dtype) and hold the group's
  // common weights.
  ZeroOptimizer(PolicyModelImpl& model, const TrainerSection& config, const Comm& group);

  // After every rank's backward: false on every rank, with nothing changed, when any rank's loss
  // or any gradient was NaN/inf. `grad_norm` is the global norm before clipping (config.grad_clip).
  bool step(bool local_loss_finite, double lr, double& grad_norm);
  // Zeroes the gradients. They live in one flat buffer the parameters' .grad() are views of
  // (the backward accumulates into it in place), so the reduce-scatter needs no copy.
  void zeroGrad();

  std::int64_t steps() const { return steps_; }
  double lr() const;
  std::uint64_t stateBytes() const;  // this rank's AdamW state (exp_avg + exp_avg_sq)
  const char* backend() const { return group_->name(); }
  int rank() const { return group_->rank(); }

  // Checkpoints keep the unsharded format: rank 0 collects parameter `index`'s state from the
  // ranks that hold pieces of it (collective over the group; the other ranks get undefined
  // tensors), and every rank loads its own piece from the full tensors.
  struct ParamState {
    torch::Tensor exp_avg, exp_avg_sq;
  };
  ParamState gatherState(std::size_t index);
  void loadState(std::size_t index, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq, std::int64_t step);

 private:
  // The part of parameter `index` in rank `r`'s shard, as [begin, end) in the flat buffer.
  std::pair<std::int64_t, std::int64_t> overlap(std::size_t index, int r) const;

  const Comm& comm_;
  std::unique_ptr<GroupCollectives> group_;
  TrainerSection config_;
  std::vector<torch::Tensor> params_;  // the model's, in order
  std::vector<std::int64_t> offsets_;  // of each in the flat buffer
  std::int64_t shard_ = 0;             // elements per rank (the flat buffer is padded to size × shard)
  void bindGrads();                    // every parameter's .grad() a view of flat_grad_
  // fn(gradients, parameters, owner) over every shard's buckets, in the same order on every rank.
  void forEachBucket(const std::function<void(torch::Tensor, torch::Tensor, int)>& fn);
  torch::Tensor flat_;         // every parameter, end to end
  torch::Tensor flat_grad_;    // their gradients, likewise
  torch::Tensor shard_param_;  // this rank's slice of flat_
  // AdamW steps the shard in chunks (views of it), so its temporaries are a chunk's size, not
  // the shard's; their state tensors are views of two shard-size buffers.
  std::vector<torch::Tensor> chunks_;
  torch::Tensor exp_avg_, exp_avg_sq_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  std::int64_t steps_ = 0;
};

}  // namespace astraflow
