// PolicyTrainer's set-up and step machinery: collate (a right-padded TrainBatch), the frozen reference for the KL
// term, NaN/inf-safe optimiser steps in lockstep across a data-parallel group, packWeights and sftStep.
#include "astraflow/trainer/policy_trainer.hpp"

#include "astraflow/trainer/lr_schedule.hpp"

#include <ATen/autocast_mode.h>
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <cmath>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/trainer/loss.hpp"
#include "trainer/autocast_scope.hpp"
#include "trainer/sliced_adamw.hpp"

namespace astraflow {

TrainBatch collate(const std::vector<TrainingSample>& episodes, const std::vector<std::int64_t>& group_ids,
                   std::int32_t pad_id) {
  TrainBatch b;
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < episodes.size(); ++i) {
    if (episodes[i].nonfinite || !std::isfinite(episodes[i].reward)) {
      b.dropped++;
      continue;
    }
    keep.push_back(i);
  }
  std::size_t T = 1;
  for (auto i : keep) T = std::max(T, episodes[i].tokens.size());
  const auto B = static_cast<std::int64_t>(keep.size());
  b.tokens = torch::full({B, static_cast<std::int64_t>(T)}, pad_id, torch::kLong);
  b.lengths = torch::zeros({B}, torch::kLong);
  b.behav = torch::zeros({B, static_cast<std::int64_t>(T)});
  b.mask = torch::zeros({B, static_cast<std::int64_t>(T)});
  b.rewards = torch::zeros({B});
  b.group_ids = torch::zeros({B}, torch::kLong);
  auto tok = b.tokens.accessor<std::int64_t, 2>();
  auto beh = b.behav.accessor<float, 2>();
  auto msk = b.mask.accessor<float, 2>();
  for (std::int64_t r = 0; r < B; ++r) {
    const TrainingSample& e = episodes[keep[r]];
    for (std::size_t t = 0; t < e.tokens.size(); ++t) {
      tok[r][t] = e.tokens[t];
      beh[r][t] = e.behav_logprobs[t];
      msk[r][t] = e.policy_mask[t];
    }
    b.lengths[r] = static_cast<std::int64_t>(e.tokens.size());
    b.rewards[r] = static_cast<float>(e.reward);
    b.group_ids[r] = group_ids.empty() ? r : group_ids[keep[r]];
  }
  return b;
}

TrainBatch TrainBatch::to(const torch::Device& device) const {
  TrainBatch b = *this;
  for (torch::Tensor* t : {&b.tokens, &b.lengths, &b.behav, &b.mask, &b.rewards, &b.group_ids}) *t = t->to(device);
  return b;
}

PolicyTrainer::PolicyTrainer(PolicyModel model, const TrainerSection& config, double temperature)
    : model_(std::move(model)), config_(config), temperature_(temperature) {
  torch::optim::AdamWOptions opts(config_.lr);
  opts.betas({config_.beta1, config_.beta2});
  opts.weight_decay(config_.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(model_->parameters(), opts);
  model_->setActivationCheckpointing(config_.activation_checkpointing);
  model_->setLogitsChunkBytes(config_.logits_chunk_bytes);
  // Under parameter sharding the reference is made sharded once the group is (setDataParallel):
  // never a whole extra copy on a device beside the whole model.
  if (config_.loss.kl_coef > 0 && config_.sharding != TrainerSection::Sharding::Parameters) freezeReference();
}

PolicyTrainer::~PolicyTrainer() {
  reference_ = PolicyModel(nullptr);  // its shards use zero_'s collectives
  reference_shards_.reset();
  zero_.reset();
  averager_.reset();
}

void PolicyTrainer::setDataParallel(const Comm* comm) {
  if (paced()) {
    throw Error("trainer: the group's parameters are sharded already (its shards hold the only copy of the blocks)");
  }
  if (comm && comm->size() > 1 && config_.sharding == TrainerSection::Sharding::Parameters &&
      model_->device().is_cuda() && gradSyncUsesMpi(config_.grad_sync, model_->device())) {
    // The sharded backward runs on autograd's CUDA thread; MPI is initialised funneled.
    throw Error("trainer.sharding: parameters on CUDA needs trainer.grad_sync auto or c10d (NCCL), not mpi");
  }
  dp_comm_ = comm;
  averager_.reset();
  zero_.reset();
  if (!comm || comm->size() <= 1) return;
  if (config_.sharding != TrainerSection::Sharding::None) {
    zero_ = std::make_unique<ZeroOptimizer>(*model_, config_, *comm);
  } else {
    averager_ = makeGradientAverager(*comm, config_.grad_sync, model_->device());
  }
  if (paced()) freezeReference();  // the KL reference, sharded as the model now is
}

void PolicyTrainer::freezeReference() {
  if (config_.loss.kl_coef <= 0) return;  // no KL penalty: nothing pulls toward a reference
  if (paced()) {
    freezeShardedReference();
    return;
  }
  reference_shards_.reset();
  reference_ = PolicyModel(model_->config());
  reference_->setNeverGenerate(model_->neverGenerate());
  reference_->setLogitsChunkBytes(config_.logits_chunk_bytes);
  reference_->place(model_->device(), torch::kFloat32);
  reference_->importTensors(model_->orderedParameters());
  reference_->eval();
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
}

// Under parameter sharding the reference is sharded as the model is: its blocks' parts are a
// frozen copy of this rank's (ZeroOptimizer::frozenCopy), gathered block by block in its forward;
// its root parameters (embedding, norms, head: whole on every rank, as the model's) are copied.
// Made uninitialised on the host first, so no whole-model buffer is ever allocated on a device.
void PolicyTrainer::freezeShardedReference() {
  torch::NoGradGuard no_grad;
  reference_shards_.reset();
  reference_ = PolicyModel(model_->config(), /*uninitialised=*/true);
  const auto ours = model_->orderedParameters();
  auto theirs = reference_->orderedParameters();
  const auto empty = torch::empty({0}, torch::kFloat32);
  std::vector<bool> in_block(theirs.size(), false);
  for (std::size_t l = 0; l < static_cast<std::size_t>(model_->config().layers); ++l) {
    for (const auto& p : reference_->blockParameters(l)) {
      for (std::size_t i = 0; i < theirs.size(); ++i) in_block[i] = in_block[i] || theirs[i].tensor.is_same(p);
    }
  }
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    if (in_block[i]) theirs[i].tensor.set_data(empty);  // the shards hold them
  }
  reference_->place(model_->device(), torch::kFloat32);
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    if (!in_block[i]) theirs[i].tensor.copy_(ours[i].tensor);
  }
  reference_->setNeverGenerate(model_->neverGenerate());
  reference_->setLogitsChunkBytes(config_.logits_chunk_bytes);
  reference_->eval();
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  reference_shards_ = zero_->frozenCopy(*reference_);
}

// A data-parallel rank with nothing to train on still takes part in the group's averaging
// (with zero gradients) and steps, so its weights stay identical to its peers'.
bool PolicyTrainer::emptyStep(int repeats, double lr) {
  if (!averager_ && !zero_) return true;
  for (int i = 0; i < repeats; ++i) {
    const auto passes = agreeMax({0, 0});  // as optimiserStep's: no-grad, then gradient passes
    zeroGrad();
    idlePasses(passes[0], false);
    idlePasses(passes[1], true);
    double norm = 0;
    if (!applyStep(torch::zeros({}), norm, lr)) return false;  // at the rate its peers step with
  }
  return true;
}

void PolicyTrainer::zeroGrad() {
  if (zero_) {
    zero_->zeroGrad();
  } else {
    optimizer_->zero_grad();
  }
}

bool PolicyTrainer::applyStep(const torch::Tensor& loss, double& grad_norm, double lr) {
  if (lr < 0) {
    const std::int64_t total = config_.decay_steps > 0 ? config_.decay_steps : schedule_length_;
    lr = scheduledLr(config_, optimizerSteps(), total);
  }
  bool stepped = false;
  if (zero_) {
    stepped = zero_->step(std::isfinite(loss.item<double>()), lr, grad_norm);
    zeroGrad();  // the model's gradients are spent either way
    if (!stepped) skipped_steps_++;
  } else if (finiteStep(loss, grad_norm)) {
    for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    slicedAdamWStep(*optimizer_);  // AdamW's step without its two whole-parameter temporaries
    stepped = true;
  }
  // Autocast caches the bf16 casts of the weights for its scope's life: after a step they are
  // stale, and the next pass of the scope (an RL batch's next step) must cast the new weights.
  if (stepped && config_.compute.bf16()) at::autocast::clear_cache();
  return stepped;
}

// A step whose loss or gradient is NaN/inf would poison every weight: it is skipped (the
// gradients are cleared) and counted. Clips the gradient norm when configured.
bool PolicyTrainer::finiteStep(const torch::Tensor& loss, double& grad_norm) {
  const bool loss_finite = std::isfinite(loss.item<double>());
  if (averager_ && !averager_->average(model_->parameters(), loss_finite)) {
    // Some rank of the group met NaN/inf: every rank skips this step alike.
    zeroGrad();
    skipped_steps_++;
    return false;
  }
  double norm = 0;
  if (config_.grad_clip > 0) {
    norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.grad_clip);
  } else {
    torch::NoGradGuard ng;
    for (const auto& p : model_->parameters()) {
      if (p.grad().defined()) norm += slicedSumOfSquares(p.grad());
    }
    norm = std::sqrt(norm);
  }
  grad_norm = norm;
  const bool group_finite = averager_ ? true : loss_finite;
  if (group_finite && std::isfinite(norm)) return true;
  zeroGrad();
  skipped_steps_++;
  return false;
}

std::vector<std::int64_t> PolicyTrainer::agreeMax(std::vector<std::int64_t> counts) const {
  if (!paced()) return counts;
  dp_comm_->allreduceMax(counts);
  return counts;
}

void PolicyTrainer::idlePasses(std::int64_t count, bool grad) { idlePasses(*model_, count, grad); }

void PolicyTrainer::idlePasses(PolicyModelImpl& model, std::int64_t count, bool grad) {
  if (count <= 0) return;
  const auto device = model.device();
  const auto token = torch::zeros({1, 1}, torch::TensorOptions().dtype(torch::kLong).device(device));
  const auto valid = torch::ones({1, 1}, torch::TensorOptions().dtype(torch::kBool).device(device));
  for (std::int64_t i = 0; i < count; ++i) {
    if (grad) {
      // A zero loss: every gradient it adds is zero (even where a logit is −inf, the product
      // with 0 has gradient 0), but each block's backward gathers and reduces as a real one.
      (model.forward(token, token, valid).sum() * 0.0).backward();
    } else {
      torch::NoGradGuard no_grad;
      model.forward(token, token, valid);
    }
  }
}

void PolicyTrainer::packWeights(std::vector<std::byte>& out) {
  if (!paced()) {
    astraflow::packWeights(*model_, out);
    return;
  }
  // From the shards, a parameter at a time: rank 0 holds one fp32 parameter beside the bf16 blob.
  if (zero_->rank() == 0) {
    astraflow::packWeights(*model_, out, [&](std::size_t i) { return zero_->gatherParameter(i); });
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < model_->orderedParameters().size(); ++i) zero_->gatherParameter(i);
}

std::int64_t PolicyTrainer::optimizerSteps() const {
  if (zero_) return zero_->steps();
  // Every parameter steps together; the first one's count is the optimiser's.
  const auto& state = optimizer_->state();
  for (const auto& group : optimizer_->param_groups()) {
    for (const auto& p : group.params()) {
      const auto it = state.find(p.unsafeGetTensorImpl());
      if (it != state.end()) return static_cast<const torch::optim::AdamWParamState&>(*it->second).step();
    }
  }
  return 0;
}

std::uint64_t PolicyTrainer::optimizerStateBytes() const {
  if (zero_) return zero_->stateBytes();
  std::uint64_t bytes = 0;
  for (const auto& [key, s] : optimizer_->state()) {
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*s);
    bytes += static_cast<std::uint64_t>(st.exp_avg().nbytes() + st.exp_avg_sq().nbytes());
  }
  return bytes;
}

double PolicyTrainer::currentLr() const {
  if (zero_) return zero_->lr();
  return static_cast<const torch::optim::AdamWOptions&>(optimizer_->param_groups().front().options()).lr();
}

double PolicyTrainer::sftStep(const TrainBatch& host_batch, double lr) {
  // The SFT learning rate holds for this step only: it is not the RL schedule's.
  if (host_batch.tokens.size(0) == 0) {
    emptyStep(1, lr);
    return 0.0;
  }
  model_->train();
  const TrainBatch batch = host_batch.to(model_->device());
  const AutocastScope autocast(config_.compute.bf16(), model_->device());
  const auto passes = agreeMax({0, 1});  // one gradient pass, as emptyStep's peers pace
  idlePasses(passes[0], false);
  auto logp = sequenceLogProbs(*model_, batch.tokens, batch.lengths, 1.0);
  const auto loss = -(logp * batch.mask).sum() / batch.mask.sum().clamp_min(1.0);
  zeroGrad();
  loss.backward();
  idlePasses(passes[1] - 1, true);
  double norm = 0;
  applyStep(loss, norm, lr);
  return loss.item<double>();
}

}  // namespace astraflow
