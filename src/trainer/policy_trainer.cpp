#include "astraflow/trainer/policy_trainer.hpp"

#include <algorithm>
#include <cmath>

#include "astraflow/rollout/generation.hpp"
#include "astraflow/trainer/loss.hpp"

namespace astraflow {

TrainBatch collate(const std::vector<Episode>& episodes, const std::vector<std::int64_t>& group_ids,
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
    const Episode& e = episodes[keep[r]];
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

PolicyTrainer::PolicyTrainer(PolicyModel model, const TrainerSection& config, double temperature)
    : model_(std::move(model)), config_(config), temperature_(temperature) {
  torch::optim::AdamWOptions opts(config_.lr);
  opts.betas({config_.beta1, config_.beta2});
  opts.weight_decay(config_.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(model_->parameters(), opts);
  if (config_.loss.kl_coef > 0) freezeReference();
}

void PolicyTrainer::freezeReference() {
  reference_ = PolicyModel(model_->config());
  reference_->importTensors(model_->orderedParameters());
  reference_->eval();
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
}

RlStepStats PolicyTrainer::rlStep(const TrainBatch& batch) {
  RlStepStats s;
  s.dropped = batch.dropped;
  if (batch.tokens.size(0) == 0) return s;
  model_->train();
  const auto& L = config_.loss;
  const auto adv = groupAdvantages(batch.rewards, batch.group_ids, L.scale_by_std, L.advantage == "batch");
  auto logp = sequenceLogProbs(*model_, batch.tokens, batch.lengths, temperature_);
  PolicyLossInputs in;
  in.logp = logp;
  in.logp_behav = batch.behav;
  in.advantages = adv;
  in.mask = batch.mask;
  if (L.kind == "decoupled") in.logp_prox = logp.detach();  // the proximal policy: θ before this step
  PolicyLossOptions opts;
  opts.clip_low = L.clip_low;
  opts.clip_high = L.clip_high;
  opts.decoupled = L.kind == "decoupled";
  opts.kl_coef = L.kl_coef;
  opts.kl_estimator = L.kl_estimator == "k1" ? KlEstimator::K1 : KlEstimator::K3;
  opts.m2po = L.m2po;
  opts.m2_threshold = L.m2_threshold;
  if (opts.kl_coef > 0) {
    torch::NoGradGuard no_grad;
    in.logp_ref = sequenceLogProbs(*reference_, batch.tokens, batch.lengths, temperature_);
  }
  {
    torch::NoGradGuard no_grad;
    const auto diff = ((logp.detach() - batch.behav).abs() * batch.mask);
    s.max_abs_behav_diff = diff.numel() ? diff.max().item<double>() : 0.0;
  }
  const PolicyLossResult r = policyLoss(in, opts);
  optimizer_->zero_grad();
  r.loss.backward();
  if (config_.grad_clip > 0) {
    s.grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.grad_clip);
  }
  optimizer_->step();
  s.loss = r.loss.item<double>();
  s.reward_mean = batch.rewards.mean().item<double>();
  s.clipped_fraction = r.clipped_fraction;
  s.kl = r.kl;
  s.m2po_masked_fraction = r.m2po_masked_fraction;
  s.tokens = r.kept_tokens;
  s.dropped += r.nonfinite_tokens;
  return s;
}

double PolicyTrainer::sftStep(const TrainBatch& batch, double lr) {
  if (batch.tokens.size(0) == 0) return 0.0;
  model_->train();
  for (auto& group : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  auto logp = sequenceLogProbs(*model_, batch.tokens, batch.lengths, 1.0);
  const auto loss = -(logp * batch.mask).sum() / batch.mask.sum().clamp_min(1.0);
  optimizer_->zero_grad();
  loss.backward();
  if (config_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.grad_clip);
  optimizer_->step();
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(config_.lr);
  }
  return loss.item<double>();
}

}  // namespace astraflow
