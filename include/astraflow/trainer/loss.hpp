#pragma once
// RL losses on token-level log-probabilities (docs/architecture.md §7; paper §3.4 and its M2PO
// appendix). Shapes: B sequences × T token positions; `mask` is 1.0 where a token is the
// policy's own (generated) and 0.0 elsewhere (prompt, environment text, padding).
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace astraflow {

// GRPO advantages: each reward minus the mean of its group; divided by the group's std
// (+eps) when `scale_by_std`. Groups are given by `group_ids` (int64, any values).
// With `batch_normalize`, the group-centred advantages are instead divided by the std of the
// whole batch (+eps) — the "batch-level normalisation" option. Both stds are population ones
// (divide by n). A group whose rewards are all equal (a singleton too) gets exactly 0.
// rewards: [B] float; group_ids: [B] int64 → [B] float.
torch::Tensor groupAdvantages(const torch::Tensor& rewards, const torch::Tensor& group_ids, bool scale_by_std = true,
                              bool batch_normalize = false, double eps = 1e-6);

enum class KlEstimator { K1, K3 };

struct PolicyLossOptions {
  double clip_low = 0.2;   // ε_low: ratio clipped to [1 − ε_low, 1 + ε_high]
  double clip_high = 0.2;  // ε_high (DAPO "clip higher" when > clip_low)
  bool decoupled = false;  // decoupled PPO: ratio against π_prox, weighted by π_prox/π_behav
  double kl_coef = 0.0;    // β of the KL penalty to the reference policy (0: off)
  KlEstimator kl_estimator = KlEstimator::K3;
  bool m2po = false;           // second-moment trust region masking
  double m2_threshold = 0.04;  // τ: mean Δ² over kept tokens must be ≤ τ
  // The token count the loss is divided by; 0: this call's own kept tokens. A micro-batch of
  // an accumulated step passes the whole step's, so the summed gradients are the unsplit step's.
  double token_denominator = 0;
};

struct PolicyLossInputs {
  torch::Tensor logp;        // [B,T] log π_θ(token), requires grad
  torch::Tensor logp_behav;  // [B,T] behaviour policy log-probs (from the engine)
  torch::Tensor logp_prox;   // [B,T] proximal policy log-probs (decoupled only; else undefined)
  torch::Tensor logp_ref;    // [B,T] frozen reference log-probs (kl_coef > 0 only)
  torch::Tensor advantages;  // [B]
  torch::Tensor mask;        // [B,T] float 0/1
};

struct PolicyLossResult {
  torch::Tensor loss;               // scalar: token-mean over kept tokens
  double clipped_fraction = 0;      // fraction of kept tokens whose ratio was clipped
  double kl = 0;                    // mean KL estimate over kept tokens (0 if off)
  double m2po_masked_fraction = 0;  // fraction of mask tokens M2PO removed
  std::int64_t m2po_masked_tokens = 0;
  std::int64_t clipped_tokens = 0;
  std::int64_t kept_tokens = 0;
  std::int64_t nonfinite_tokens = 0;  // mask tokens dropped for NaN/inf in logp_behav, logp_prox,
                                      // logp_ref (when used) or their sequence's advantage
};

// PPO-clip (or decoupled PPO) with optional KL penalty and M2PO masking; the loss is the
// token-level mean over kept tokens of −w·min(r·A, clip(r)·A) + β·KL.
//   r = exp(logp − logp_old), logp_old = logp_prox if decoupled else logp_behav
//   w = exp(logp_prox − logp_behav) (no gradient) if decoupled else 1
// Mask tokens whose logp_behav / logp_prox / logp_ref (those in use) or advantage is NaN/inf
// are dropped before anything else and counted in `nonfinite_tokens`; NaN in `logp` itself
// at a kept token is the trainer's own divergence and is not hidden (at dropped or padding
// positions it is ignored). Throws std::invalid_argument, naming the
// tensor, on a missing input or a shape mismatch.
PolicyLossResult policyLoss(const PolicyLossInputs& in, const PolicyLossOptions& options);

// The mask policyLoss trains on (no gradient): `in.mask` without the non-finite tokens, then
// M2PO's removals when options.m2po (which reads in.logp). Fills the result's nonfinite_tokens,
// m2po_masked_tokens and m2po_masked_fraction. For a step split into micro-batches, computed
// once over the whole step.
torch::Tensor keptTokenMask(const PolicyLossInputs& in, const PolicyLossOptions& options, PolicyLossResult& counts);

// M2PO mask: Δ = logp − logp_behav (no gradient). Among tokens with mask = 1, removes
// tokens in decreasing order of Δ² until the mean Δ² of the kept tokens is ≤ threshold
// (or none is left). One pool over the whole batch, not per sequence; ties in Δ² go in flat
// index order; a non-finite Δ counts as the largest. Returns the new float mask [B,T].
torch::Tensor m2poMask(const torch::Tensor& logp, const torch::Tensor& logp_behav, const torch::Tensor& mask,
                       double threshold);

// Per-token log-probs of `tokens` under `logits`: logits [B,T,V] predict tokens [B,T]
// (already shifted by the caller) → [B,T], computed as log_softmax then gather, in float32.
torch::Tensor tokenLogProbs(const torch::Tensor& logits, const torch::Tensor& tokens);

// Per-token KL estimates between π_θ and π_ref from log-probs: k1 = logp − logp_ref,
// k3 = exp(logp_ref − logp) − (logp_ref − logp) − 1.
torch::Tensor klEstimate(const torch::Tensor& logp, const torch::Tensor& logp_ref, KlEstimator estimator);

}  // namespace astraflow
