#pragma once
// One policy's optimiser: RL steps (GRPO advantages + PPO-family loss) and supervised steps
// on training samples. Used by `train-local`, `sft` and the distributed trainer role.
#include <torch/optim/adamw.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/model/training_sample.hpp"
#include "astraflow/trainer/grad_sync.hpp"
#include "astraflow/trainer/loss.hpp"
#include "astraflow/trainer/zero_optimizer.hpp"

namespace astraflow {

// Right-padded tensors of a list of training samples.
struct TrainBatch {
  torch::Tensor tokens;      // [B,T] int64, pad after each sequence
  torch::Tensor lengths;     // [B] int64
  torch::Tensor behav;       // [B,T] float behaviour log-probs (0 off-policy-mask)
  torch::Tensor mask;        // [B,T] float: 1 on the policy's own tokens
  torch::Tensor rewards;     // [B] float
  torch::Tensor group_ids;   // [B] int64
  std::int64_t dropped = 0;  // episodes left out: NaN/inf reward or logits

  TrainBatch to(const torch::Device& device) const;  // the tensors on `device` (a copy each, if elsewhere)
};

// Samples with a non-finite reward or a nonfinite flag are dropped and counted.
TrainBatch collate(const std::vector<TrainingSample>& episodes, const std::vector<std::int64_t>& group_ids,
                   std::int32_t pad_id);

struct RlStepStats {
  double loss = 0;
  double reward_mean = 0;
  double clipped_fraction = 0;
  double kl = 0;
  double m2po_masked_fraction = 0;
  double grad_norm = 0;
  double max_abs_behav_diff = 0;  // |log π_θ − log π_behav| on policy tokens before the step
  std::int64_t tokens = 0;
  std::int64_t dropped = 0;        // episodes + tokens dropped for non-finite values
  std::int64_t skipped_steps = 0;  // optimiser steps skipped: NaN/inf loss or gradient
  // How the batch went through the model with gradients (every optimiser step of the batch):
  // forward/backward passes, tokens through them (padding included) and sequence tokens.
  std::int64_t micro_batches = 0;
  std::int64_t forward_tokens = 0;
  std::int64_t sequence_tokens = 0;
};

// The model's device is the trainer's: place the model (float32) before constructing. With
// config.compute.bf16() the forward and backward passes run under autocast to bf16; the master
// weights and AdamW state stay float32.
class PolicyTrainer {
 public:
  PolicyTrainer(PolicyModel model, const TrainerSection& config, double temperature);
  ~PolicyTrainer();  // the sharded optimiser goes first: it unhooks itself from the model
  PolicyTrainer(const PolicyTrainer&) = delete;
  PolicyTrainer& operator=(const PolicyTrainer&) = delete;

  // trainer.ppo_epochs passes over the batch, each of trainer.mini_batches optimiser steps on
  // a shuffled slice; each step's gradients accumulate over micro-batches of at most
  // trainer.micro_batch_tokens tokens (rl_step.cpp).
  RlStepStats rlStep(const TrainBatch& batch);
  // Cross-entropy on the policy tokens (mask) of reference episodes; returns the mean loss.
  double sftStep(const TrainBatch& batch, double lr);

  // Copies the current weights into the frozen reference the KL penalty pulls toward (done at
  // construction when trainer.loss.kl_coef > 0; call again after loading a warm start). A
  // no-op without a KL penalty.
  void freezeReference();

  // Data parallelism: gradients are averaged over `comm` (the policy's trainer group, through
  // trainer.grad_sync) before every optimiser step. Collective over the group; all ranks must
  // start from the same weights and call the same steps. Once parameters are sharded, the
  // shards hold the only copy of the blocks: calling it again is refused (Error).
  void setDataParallel(const Comm* comm);
  // With trainer.sharding: optimizer or parameters (and more than one rank), the sharded
  // optimiser takes the averager's place. Parameter sharding makes every forward collective:
  // the group's ranks then agree, before each pass over their micro-batches, on the most any of
  // them runs, and the others run as many idle one-token passes (docs/training.md).
  const char* gradSyncBackend() const { return zero_ ? zero_->backend() : averager_ ? averager_->backend() : "none"; }
  ZeroOptimizer* zero() { return zero_.get(); }  // null unless sharded
  std::uint64_t optimizerStateBytes() const;     // this rank's AdamW state
  // The current weights as a weight-store blob (model/weight_blob.hpp). Collective over the
  // group when parameters are sharded: rank 0 gets the blob, the others an empty one.
  void packWeights(std::vector<std::byte>& out);

  // The learning-rate schedule's length in optimiser steps (trainer.decay_steps when set); RL
  // steps set each optimiser step's rate from it and the optimiser's own step count.
  void setScheduleLength(std::int64_t total_steps) { schedule_length_ = total_steps; }
  std::int64_t optimizerSteps() const;  // taken so far (AdamW's per-parameter count; 0 before any)
  double currentLr() const;             // the rate the last step used (trainer.lr before any)

  PolicyModel& model() { return model_; }
  // The KL penalty's frozen reference (null without one; under parameter sharding its blocks
  // are empty between passes, as the model's are).
  const PolicyModel& reference() const { return reference_; }
  std::int64_t skippedSteps() const { return skipped_steps_; }
  torch::optim::AdamW& optimizer() { return *optimizer_; }

 private:
  struct StepTotals;
  struct RlContext;
  StepTotals optimiserStep(RlContext& c, const std::vector<std::int64_t>& rows, RlStepStats& s);
  // A split step's kept-token mask [B,T] (0 outside `rows`); sets `opts` to divide every
  // micro-batch by the step's kept count, and counts non-finite and M2PO-masked tokens.
  torch::Tensor splitStepMask(RlContext& c, const std::vector<std::int64_t>& rows, bool m2po_pass,
                              PolicyLossOptions& opts, StepTotals& totals);
  // log π of `rows` at the current weights, micro-batched, no graph: written into `out` [B,T].
  void logProbsNoGrad(PolicyModelImpl& model, const RlContext& c, const std::vector<std::int64_t>& rows,
                      torch::Tensor& out) const;
  // Parameter sharding's pacing: the group's maximum of each count (the local counts as they
  // are when parameters are not sharded), and `count` idle one-token passes (with a backward
  // of a zero loss when `grad`) that make the same collective calls as a real pass.
  std::vector<std::int64_t> agreeMax(std::vector<std::int64_t> counts) const;
  void idlePasses(std::int64_t count, bool grad);
  void idlePasses(PolicyModelImpl& model, std::int64_t count, bool grad);  // through `model` (the reference)
  void freezeShardedReference();
  void referenceLogProbs(RlContext& c, const std::vector<std::int64_t>& all);
  bool paced() const { return zero_ && zero_->shardsParameters(); }
  // Averages (or reduce-scatters) the gradients over the group, clips, and steps at `lr` (the
  // schedule's rate when lr < 0). False, with nothing changed, when the step was skipped for
  // NaN/inf on any rank.
  bool applyStep(const torch::Tensor& loss, double& grad_norm, double lr = -1);
  bool finiteStep(const torch::Tensor& loss, double& grad_norm);
  void zeroGrad();
  std::int64_t schedule_length_ = 1;
  // A step with zero gradients at `lr` (< 0: the schedule's), for a data-parallel rank with
  // nothing to train on; false when the group skipped a step.
  bool emptyStep(int repeats, double lr);

  std::int64_t skipped_steps_ = 0;
  const Comm* dp_comm_ = nullptr;
  std::unique_ptr<GradientAverager> averager_;
  std::unique_ptr<ZeroOptimizer> zero_;
  PolicyModel model_;
  PolicyModel reference_{nullptr};
  std::unique_ptr<ParameterShards> reference_shards_;  // parameter sharding: the reference's blocks
  TrainerSection config_;
  double temperature_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

}  // namespace astraflow
