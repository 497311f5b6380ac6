// One RL batch: GRPO advantages over the whole batch, then trainer.ppo_epochs passes of
// trainer.mini_batches optimiser steps, each on a shuffled slice, each step's gradients
// accumulated over micro-batches (docs/training.md).
//
// Exactness: a step split into micro-batches takes the unsplit step's gradient to float
// rounding. Its kept-token mask (non-finite drops, M2PO) is computed once over the step and
// every micro-batch's loss is divided by the step's kept-token count, so the sum of their
// gradients is the gradient of the step's token-mean — not a mean of micro-batch means.
// The behaviour and proximal log-probs are those at the batch's start for every step.
#include <optional>

#include "astraflow/trainer/loss.hpp"
#include "astraflow/trainer/micro_batches.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "trainer/autocast_scope.hpp"

namespace astraflow {

// What every step of one batch shares.
struct PolicyTrainer::RlContext {
  TrainBatch batch;                   // on the model's device
  std::vector<std::int64_t> lengths;  // on the host
  torch::Tensor advantages;           // [B]
  torch::Tensor logp_ref;             // [B,T] (kl_coef > 0)
  torch::Tensor logp_start;  // [B,T] log π at the batch's start (filled by the first step without a start pass)
  PolicyLossOptions opts;
  std::optional<SharedPrefixes> shared;  // trainer.shared_prefix
  std::vector<MicroBatch> plan(const std::vector<std::int64_t>& rows, const TrainerSection& t) const {
    return planMicroBatches(rows, lengths, t.micro_batch_tokens, t.packing, shared ? &*shared : nullptr);
  }
};

// One optimiser step's loss figures, summed over its micro-batches.
struct PolicyTrainer::StepTotals {
  double loss = 0, kl = 0;
  std::int64_t kept = 0, clipped = 0, nonfinite = 0, m2po_masked = 0;
  bool stepped = false;
};

namespace {

PolicyLossOptions lossOptions(const LossSection& L) {
  PolicyLossOptions opts;
  opts.clip_low = L.clip_low;
  opts.clip_high = L.clip_high;
  opts.decoupled = L.kind == LossKind::Decoupled;
  opts.kl_coef = L.kl_coef;
  opts.kl_estimator = L.kl_estimator == LossSection::Kl::K1 ? KlEstimator::K1 : KlEstimator::K3;
  opts.m2po = L.m2po;
  opts.m2_threshold = L.m2_threshold;
  return opts;
}

// Rows [B,T] tensors of `rows`, the first `width` columns.
torch::Tensor take(const torch::Tensor& t, const torch::Tensor& index, std::int64_t width) {
  return t.index_select(0, index).narrow(1, 0, width);
}

}  // namespace

void PolicyTrainer::logProbsNoGrad(PolicyModelImpl& model, const RlContext& c, const std::vector<std::int64_t>& rows,
                                   torch::Tensor& out) const {
  torch::NoGradGuard no_grad;
  if (!out.defined()) out = torch::zeros(c.batch.behav.sizes(), c.batch.behav.options());
  for (const auto& micro : c.plan(rows, config_)) {
    const auto logp = microBatchLogProbs(model, micro, c.batch.tokens, c.batch.lengths, temperature_);
    out.narrow(1, 0, logp.size(1)).index_copy_(0, rowIndex(micro.rows, out.device()), logp);
  }
}

torch::Tensor PolicyTrainer::splitStepMask(RlContext& c, const std::vector<std::int64_t>& rows, bool m2po_pass,
                                           PolicyLossOptions& opts, StepTotals& totals) {
  const auto& b = c.batch;
  const auto T = b.tokens.size(1);
  const auto index = rowIndex(rows, b.tokens.device());
  PolicyLossInputs in;
  in.logp_behav = take(b.behav, index, T);
  in.mask = take(b.mask, index, T);
  in.advantages = c.advantages.index_select(0, index);
  if (opts.decoupled) in.logp_prox = take(c.logp_start, index, T);
  if (opts.kl_coef > 0) in.logp_ref = take(c.logp_ref, index, T);
  if (opts.m2po) {
    // M2PO pools the whole step's tokens: log π at the current weights first. The batch's
    // start pass already holds them for its first step.
    torch::Tensor now;
    if (m2po_pass) {
      logProbsNoGrad(*model_, c, rows, now);
    } else {
      now = c.logp_start;
    }
    in.logp = take(now, index, T);
  }
  PolicyLossResult counts;
  const auto kept = keptTokenMask(in, opts, counts);
  totals.nonfinite = counts.nonfinite_tokens;
  totals.m2po_masked = counts.m2po_masked_tokens;
  opts.m2po = false;  // applied here, over the step
  opts.token_denominator = std::max<double>(1.0, kept.sum().item<double>());
  return torch::zeros(b.mask.sizes(), kept.options()).index_copy_(0, index, kept);
}

PolicyTrainer::StepTotals PolicyTrainer::optimiserStep(RlContext& c, const std::vector<std::int64_t>& rows,
                                                       RlStepStats& s) {
  StepTotals totals;
  const auto& b = c.batch;
  const auto device = b.tokens.device();
  const auto micros = c.plan(rows, config_);
  const bool fill_start = !c.logp_start.defined();  // the batch's first step fills it
  // M2PO's pass over the split step at the current weights (below), then the gradient passes:
  // the counts the group paces to under parameter sharding.
  const bool m2po_pass = micros.size() > 1 && c.opts.m2po && !(s.micro_batches == 0 && !fill_start);
  const auto passes =
      agreeMax({m2po_pass ? static_cast<std::int64_t>(micros.size()) : 0, static_cast<std::int64_t>(micros.size())});
  if (fill_start) c.logp_start = torch::zeros(b.behav.sizes(), b.behav.options());
  PolicyLossOptions opts = c.opts;

  // The step's kept-token mask and count, when the step is split: every micro-batch divides by
  // the step's count. Unsplit, policyLoss makes them itself (the same function).
  const torch::Tensor step_mask = micros.size() > 1 ? splitStepMask(c, rows, m2po_pass, opts, totals) : torch::Tensor();

  idlePasses(passes[0] - (m2po_pass ? static_cast<std::int64_t>(micros.size()) : 0), false);

  zeroGrad();
  torch::Tensor step_loss = torch::zeros({}, b.behav.options());
  for (const auto& micro : micros) {
    const auto index = rowIndex(micro.rows, device);
    auto logp = microBatchLogProbs(*model_, micro, b.tokens, b.lengths, temperature_);
    const auto width = logp.size(1);
    if (fill_start) c.logp_start.narrow(1, 0, width).index_copy_(0, index, logp.detach());
    PolicyLossInputs in;
    in.logp = logp;
    in.logp_behav = take(b.behav, index, width);
    in.mask = take(step_mask.defined() ? step_mask : b.mask, index, width);
    in.advantages = c.advantages.index_select(0, index);
    if (opts.decoupled) in.logp_prox = take(c.logp_start, index, width);
    if (opts.kl_coef > 0) in.logp_ref = take(c.logp_ref, index, width);
    const PolicyLossResult r = policyLoss(in, opts);
    r.loss.backward();
    step_loss = step_loss + r.loss.detach();
    totals.kl += r.kl;
    totals.kept += r.kept_tokens;
    totals.clipped += r.clipped_tokens;
    if (micros.size() == 1) {
      totals.nonfinite = r.nonfinite_tokens;
      totals.m2po_masked = r.m2po_masked_tokens;
    }
    s.micro_batches++;
    s.forward_tokens += micro.cells();
    for (const auto row : micro.rows) s.sequence_tokens += c.lengths[static_cast<std::size_t>(row)];
  }
  idlePasses(passes[1] - static_cast<std::int64_t>(micros.size()), true);
  totals.loss = step_loss.item<double>();
  if (!applyStep(step_loss, s.grad_norm)) {
    s.skipped_steps++;
    return totals;
  }
  totals.stepped = true;
  return totals;
}

// The KL reference's log-probs of every row into c.logp_ref. Sharded, the reference's forward
// gathers its blocks from the group: every rank makes as many passes as the one with the most
// micro-batches.
void PolicyTrainer::referenceLogProbs(RlContext& c, const std::vector<std::int64_t>& all) {
  if (!reference_) freezeReference();  // one sharded rank alone, started from no warm start
  const auto ref_micros = static_cast<std::int64_t>(c.plan(all, config_).size());
  const auto ref_passes = agreeMax({ref_micros})[0];
  logProbsNoGrad(*reference_, c, all, c.logp_ref);
  idlePasses(*reference_, ref_passes - ref_micros, false);
}

RlStepStats PolicyTrainer::rlStep(const TrainBatch& host_batch) {
  RlStepStats s;
  s.dropped = host_batch.dropped;
  const int passes = config_.ppo_epochs, slices = config_.mini_batches;
  const auto B = host_batch.tokens.size(0);
  if (B == 0) {
    const AutocastScope autocast(config_.compute.bf16(), model_->device());
    if (config_.loss.kl_coef > 0 && paced()) idlePasses(*reference_, agreeMax({0})[0], false);  // the peers' reference
    idlePasses(agreeMax({0})[0], false);  // parameter sharding: the peers' pass at the batch's start
    emptyStep(passes * slices, -1);
    return s;
  }
  model_->train();
  RlContext c;
  c.batch = host_batch.to(model_->device());
  const auto host_lengths = host_batch.lengths.to(torch::kCPU).contiguous();
  c.lengths.assign(host_lengths.data_ptr<std::int64_t>(), host_lengths.data_ptr<std::int64_t>() + B);
  if (config_.shared_prefix)
    c.shared =
        findSharedPrefixes(host_batch.tokens, host_batch.lengths, host_batch.group_ids, treePairCost(model_->config()));
  const AutocastScope autocast(config_.compute.bf16(), model_->device());
  const auto& L = config_.loss;
  c.advantages =
      groupAdvantages(c.batch.rewards, c.batch.group_ids, L.scale_by_std, L.advantage == LossSection::Advantage::Batch);
  c.opts = lossOptions(L);
  std::vector<std::int64_t> all(static_cast<std::size_t>(B));
  for (std::int64_t i = 0; i < B; ++i) all[static_cast<std::size_t>(i)] = i;
  if (c.opts.kl_coef > 0) referenceLogProbs(c, all);
  // The log-probs at the batch's start (the proximal policy, and the behaviour-diff report):
  // taken from the first step's own forwards when that step covers the whole batch and needs
  // nothing of them before its backward; else from a pass of their own.
  const auto start_micros = static_cast<std::int64_t>(c.plan(all, config_).size());
  const bool start_pass = slices > 1 || (start_micros > 1 && (c.opts.decoupled || c.opts.m2po));
  const auto start_passes = agreeMax({start_pass ? start_micros : 0})[0];
  if (start_pass) logProbsNoGrad(*model_, c, all, c.logp_start);
  idlePasses(start_passes - (start_pass ? start_micros : 0), false);

  // Mini-batch slices: a permutation per pass (miniBatchOrder), cut into `slices` near-equal parts.
  double loss_weighted = 0, kl_weighted = 0;
  std::int64_t first_kept = 0, first_masked = 0, last_kept = 0, last_clipped = 0;
  bool going = true;  // false once a step was skipped for NaN/inf (on every rank of a group alike)
  for (int pass = 0; pass < passes && going; ++pass) {
    const std::vector<std::int64_t> order = slices > 1 ? miniBatchOrder(B, optimizerSteps()) : all;
    last_kept = last_clipped = 0;
    for (int k = 0; k < slices && going; ++k) {
      const auto begin = static_cast<std::size_t>(B * k / slices), end = static_cast<std::size_t>(B * (k + 1) / slices);
      if (begin == end) {  // fewer sequences than slices: the step is taken empty, as a peer's would be
        going = emptyStep(1, -1);
        continue;
      }
      const std::vector<std::int64_t> rows(order.begin() + static_cast<std::ptrdiff_t>(begin),
                                           order.begin() + static_cast<std::ptrdiff_t>(end));
      const StepTotals t = optimiserStep(c, rows, s);
      if (pass == 0) {
        loss_weighted += t.loss * static_cast<double>(t.kept);
        kl_weighted += t.kl * static_cast<double>(t.kept);
        first_kept += t.kept;
        first_masked += t.m2po_masked;
        s.dropped += t.nonfinite;
      }
      last_kept += t.kept;
      last_clipped += t.clipped;
      going = t.stepped;
    }
  }
  {
    torch::NoGradGuard no_grad;
    const auto diff = (c.logp_start - c.batch.behav).abs() * c.batch.mask;
    s.max_abs_behav_diff = diff.numel() ? diff.max().item<double>() : 0.0;
  }
  s.tokens = first_kept;
  s.loss = first_kept ? loss_weighted / static_cast<double>(first_kept) : 0.0;
  s.kl = first_kept ? kl_weighted / static_cast<double>(first_kept) : 0.0;
  s.m2po_masked_fraction = first_kept + first_masked
                               ? static_cast<double>(first_masked) / static_cast<double>(first_kept + first_masked)
                               : 0.0;
  s.clipped_fraction = last_kept ? static_cast<double>(last_clipped) / static_cast<double>(last_kept) : 0.0;
  s.reward_mean = c.batch.rewards.mean().item<double>();
  return s;
}

}  // namespace astraflow
