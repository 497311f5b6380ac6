#pragma once
// Sharded data parallelism over a policy's trainer group (trainer.sharding; docs/training.md).
//
// The parameters are grouped in units, each laid end to end in one flat buffer cut into equal
// parts, part r belonging to rank r. Every rank keeps AdamW's state for its parts alone.
//  - optimizer (ZeRO-1): the whole model is one *replicated* unit: every rank holds all the
//    weights and gradients (the model's tensors are views of the unit's buffers); after the
//    backward the gradients are reduced to each part's owner, the owner steps its part, and
//    the updated parts are broadcast back into every rank's weights.
//  - parameters (FSDP-style): each transformer block is a *sharded* unit: a rank holds only its
//    part of the block's weights and gradients. The model gathers a block's full weights just
//    before running it and releases them after (this class is the model's ParameterShards);
//    the backward recomputes the block between a second gather and a reduce-scatter of its
//    gradients into the owners' parts. The embeddings, final norm and output head form one
//    replicated unit: the forward needs them at its first and last step, so they would be
//    gathered for the whole step anyway.
// Every rank must make the same collective calls in the same order: with parameter sharding,
// every forward is collective (PolicyTrainer paces uneven micro-batches).
// The collectives go over trainer.grad_sync's transport (trainer/group_collectives.hpp).
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/model/parameter_shards.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/trainer/group_collectives.hpp"

namespace astraflow {

class ZeroOptimizer final : public ParameterShards {
 public:
  // Collective over `group`. The model must be placed (device and dtype) and hold the group's
  // common weights. With config.sharding == Parameters the blocks' weights move into the shards
  // and the model is pointed at this object (until it is destroyed).
  ZeroOptimizer(PolicyModelImpl& model, const TrainerSection& config, const Comm& group);
  ~ZeroOptimizer() override;
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // After every rank's backward: false on every rank, with nothing changed, when any rank's loss
  // or any gradient was NaN/inf. `grad_norm` is the global norm before clipping (config.grad_clip).
  bool step(bool local_loss_finite, double lr, double& grad_norm);
  // Zeroes the gradients. A replicated unit's live in one flat buffer the parameters' .grad()
  // are views of (the backward accumulates into it in place, and the reduction needs no copy).
  void zeroGrad();

  bool shardsParameters() const { return shards_parameters_; }
  std::int64_t steps() const { return steps_; }
  double lr() const;
  std::uint64_t stateBytes() const;     // this rank's AdamW state (exp_avg + exp_avg_sq)
  std::uint64_t residentBytes() const;  // this rank's weights and gradients held between steps
  const char* backend() const { return group_->name(); }
  int rank() const { return group_->rank(); }

  // Checkpoints keep the unsharded format: rank 0 collects parameter `index`'s state (or, for
  // a sharded parameter, its fp32 value) from the ranks that hold pieces of it (collective over
  // the group; the other ranks get undefined tensors), and every rank loads its own piece from
  // the full tensors. A replicated parameter's value is the model's own (no communication).
  // One moment at a time, so the writing rank holds one parameter-sized buffer, not two.
  enum class Moment { ExpAvg, ExpAvgSq };
  torch::Tensor gatherState(std::size_t index, Moment moment);
  void loadState(std::size_t index, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq, std::int64_t step);
  torch::Tensor gatherParameter(std::size_t index);

  // The KL penalty's reference under parameter sharding: a frozen copy of this rank's block
  // parts that gathers `reference`'s blocks from the group as this model's are (the same layout,
  // the same collectives), never reduces. `reference` has this model's config; its root
  // parameters (embedding, norms, head) are the caller's; its block parameters become empty
  // placeholders and `reference` is pointed at the returned object, which must not outlive this.
  // Collective-free; its gather/release are collective over the group.
  std::unique_ptr<ParameterShards> frozenCopy(PolicyModelImpl& reference) const;

  // ParameterShards (parameter sharding only).
  void gather(std::size_t layer) override;
  void release(std::size_t layer) override;
  void reduceGradients(std::size_t layer, const std::vector<torch::Tensor>& grads) override;
  void load(std::size_t index, const torch::Tensor& value) override;

 private:
  struct Unit {
    std::vector<std::size_t> params;    // indices into params_
    std::vector<std::int64_t> offsets;  // of each in the unit's flat layout
    std::int64_t part = 0;              // values per rank (the unit is padded to size × part)
    bool sharded = false;
    std::int64_t state_base = 0;  // of this rank's part in exp_avg_ / exp_avg_sq_
    std::int64_t local_base = 0;  // sharded: of this rank's part in local_ / local_grad_
    torch::Tensor full;           // replicated: every value (the parameters view it); sharded: while gathered
    torch::Tensor full_grad;      // replicated: every gradient (the parameters' .grad() view it)
  };
  struct Place {
    std::size_t unit;
    std::int64_t offset;
  };
  // This rank's part of unit u: its weights, its gradients.
  torch::Tensor partOf(const Unit& u) const;
  torch::Tensor gradPartOf(const Unit& u) const;
  void bindGrads();  // every replicated parameter's .grad() a view of its unit's full_grad
  // Set-up, in order: the units and their parameters; each unit's flat layout and this rank's
  // part (returns the state and local totals); the blocks' parts taken from the model; the
  // replicated units' buffers the parameters move into; AdamW over chunks of the parts.
  void partitionUnits();
  std::pair<std::int64_t, std::int64_t> layOutUnits();
  void shardBlocks(std::int64_t local_total);
  void replicateUnits();
  void makeAdam(std::int64_t state_total);
  // fn(gradients, parameters, owner) over the replicated units' parts, a bucket at a time, in
  // the same order on every rank.
  void forEachReplicatedBucket(const std::function<void(torch::Tensor, torch::Tensor, int)>& fn);
  // Rank 0 gets parameter `index` whole from the ranks' parts, part(u) on each rank.
  torch::Tensor gatherToRoot(std::size_t index, const std::function<torch::Tensor(const Unit&)>& part);
  // This rank's piece of parameter `index` from its full value, into part(u).
  void loadPiece(std::size_t index, const torch::Tensor& value, const std::function<torch::Tensor(const Unit&)>& part);

  PolicyModelImpl& model_;
  const Comm& comm_;
  std::unique_ptr<GroupCollectives> group_;
  TrainerSection config_;
  bool shards_parameters_ = false;
  std::vector<torch::Tensor> params_;  // the model's, in orderedParameters() order
  std::vector<Place> place_;           // of each parameter
  std::vector<Unit> units_;            // parameter sharding: units_[0] the root, units_[1 + l] block l
  torch::Tensor local_, local_grad_;   // the sharded units' parts, end to end
  torch::Tensor placeholder_;          // 0 elements: what a released block's tensors hold
  // AdamW steps the parts in chunks (views of them), so its temporaries are a chunk's size; the
  // chunks' state tensors are views of two buffers covering every unit's part.
  std::vector<torch::Tensor> chunks_, chunk_grads_;
  torch::Tensor exp_avg_, exp_avg_sq_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  std::int64_t steps_ = 0;
};

}  // namespace astraflow
