// GRPO advantages, the PPO-clip / decoupled-PPO policy loss with KL penalty, per-token
// log-probs and KL estimators (docs/architecture.md §7; paper §3.4). M2PO masking is in loss_m2po.cpp.
#include "astraflow/trainer/loss.hpp"

#include <sstream>
#include <stdexcept>
#include <string>

namespace astraflow {
namespace {

std::string shapeOf(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

// Throws std::invalid_argument naming `name` unless `t` is defined with exactly `expected` shape.
void requireShape(const char* fn, const torch::Tensor& t, const char* name, torch::IntArrayRef expected,
                  const char* why) {
  if (t.defined() && t.sizes() == expected) return;
  std::ostringstream os;
  os << fn << ": " << name << " has shape " << shapeOf(t) << ", expected " << expected << " (" << why << ")";
  throw std::invalid_argument(os.str());
}

}  // namespace

torch::Tensor groupAdvantages(const torch::Tensor& rewards, const torch::Tensor& group_ids, bool scale_by_std,
                              bool batch_normalize, double eps) {
  if (!rewards.defined() || rewards.dim() != 1)
    throw std::invalid_argument("groupAdvantages: rewards has shape " + shapeOf(rewards) + ", expected [B]");
  requireShape("groupAdvantages", group_ids, "group_ids", rewards.sizes(), "one group id per reward");
  if (group_ids.scalar_type() != torch::kLong) throw std::invalid_argument("groupAdvantages: group_ids must be int64");

  torch::NoGradGuard no_grad;  // advantages are constants of the loss
  const auto out_dtype = rewards.is_floating_point() ? rewards.scalar_type() : torch::kFloat;
  if (rewards.numel() == 0) return torch::empty({0}, rewards.options().dtype(out_dtype));

  // Group ids may be any int64 values: map them to 0..G-1 first. Statistics in double.
  const auto r = rewards.detach().to(torch::kDouble);
  auto [unique_ids, group_of, counts] =
      at::_unique2(group_ids, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/true);
  const auto num_groups = unique_ids.size(0);
  const auto count = counts.to(torch::kDouble);
  const auto zeros = torch::zeros({num_groups}, r.options());
  const auto group_mean = zeros.index_add(0, group_of, r) / count;

  // A group whose rewards are all equal (a singleton in particular) carries no signal: its
  // advantages are exactly 0, not rounding noise nor 0/0, so zero-advantage filters (DAPO
  // dynamic sampling, paper App. A.8 filter_zero_adv) see it as such. A group is flat when
  // every member equals one representative member (any one: index_put_ keeps one of them).
  const auto representative = torch::zeros({num_groups}, group_of.options())
                                  .index_put_({group_of}, torch::arange(r.size(0), group_of.options()));
  const auto differs = (r != r.index_select(0, representative.index_select(0, group_of))).to(torch::kDouble);
  const auto flat_member = (zeros.index_add(0, group_of, differs) == 0).index_select(0, group_of);
  const auto centred = torch::where(flat_member, torch::zeros_like(r), r - group_mean.index_select(0, group_of));

  torch::Tensor adv = centred;
  if (batch_normalize) {
    // "Group-level reward and batch-level advantage normalisation" (paper App. A.2): the
    // group-centred values divided by their std over the whole batch; scale_by_std is then
    // ignored. Population std (divide by B), like the group std below.
    const auto batch_var = (centred - centred.mean()).square().mean();
    adv = centred / (batch_var.sqrt() + eps);
  } else if (scale_by_std) {
    // GRPO: (r − mean_g) / (std_g + eps). The std is the population one (divide by the group
    // size n, not n − 1): it is defined for n = 1 and matches the batch-level variant.
    const auto group_var = zeros.index_add(0, group_of, centred.square()) / count;
    adv = centred / (group_var.sqrt().index_select(0, group_of) + eps);
  }
  return torch::where(flat_member, torch::zeros_like(adv), adv).to(out_dtype);
}

PolicyLossResult policyLoss(const PolicyLossInputs& in, const PolicyLossOptions& options) {
  constexpr const char* kFn = "policyLoss";
  if (!in.logp.defined() || in.logp.dim() != 2)
    throw std::invalid_argument(std::string(kFn) + ": logp has shape " + shapeOf(in.logp) + ", expected [B,T]");
  if (!in.logp.is_floating_point()) throw std::invalid_argument("policyLoss: logp must be floating point");
  const auto bt = in.logp.sizes();
  const auto batch = bt[0];
  requireShape(kFn, in.logp_behav, "logp_behav", bt, "same as logp");
  requireShape(kFn, in.mask, "mask", bt, "same as logp");
  requireShape(kFn, in.advantages, "advantages", {batch}, "one per sequence of logp");
  if (options.decoupled) requireShape(kFn, in.logp_prox, "logp_prox", bt, "needed by decoupled PPO");
  const bool use_kl = options.kl_coef > 0;
  if (use_kl) requireShape(kFn, in.logp_ref, "logp_ref", bt, "needed by kl_coef > 0");
  if (!(options.clip_low >= 0 && options.clip_high >= 0))
    throw std::invalid_argument("policyLoss: clip_low and clip_high must be >= 0");

  PolicyLossResult result;
  // Everything but logp is a constant of the loss.
  const auto logp_behav = in.logp_behav.detach();
  const auto logp_prox = options.decoupled ? in.logp_prox.detach() : torch::Tensor();
  const auto logp_ref = use_kl ? in.logp_ref.detach() : torch::Tensor();
  const auto advantages = in.advantages.detach().unsqueeze(1).expand(bt);  // A broadcast over T

  const torch::Tensor mask = keptTokenMask(in, options, result);  // final 0/1 mask, logp's dtype
  const auto keep = mask != 0;
  result.kept_tokens = keep.sum().item<std::int64_t>();

  // Dropped positions get 0 in every input *before* the arithmetic: a NaN/inf there would
  // otherwise survive a multiplication by the mask (NaN·0 = NaN), in the value or the gradient.
  const auto kept = [&keep](const torch::Tensor& t) { return torch::where(keep, t, torch::zeros_like(t)); };
  const auto logp = kept(in.logp);  // gradient flows to kept tokens only
  const auto behav = kept(logp_behav);
  const auto adv = kept(advantages);

  // Paper §3.4 / AReaL decoupled PPO: the ratio is taken against the proximal policy and the
  // token weighted by the (gradient-free) behaviour importance weight π_prox/π_behav.
  torch::Tensor logp_old = behav;
  torch::Tensor weight;  // undefined: w = 1
  if (options.decoupled) {
    logp_old = kept(logp_prox);
    weight = torch::exp(logp_old - behav);
  }
  const auto ratio = torch::exp(logp - logp_old);
  const auto surr_unclipped = ratio * adv;
  const auto surr_clipped = torch::clamp(ratio, 1.0 - options.clip_low, 1.0 + options.clip_high) * adv;
  const auto surrogate = torch::minimum(surr_unclipped, surr_clipped);
  auto loss_tok = weight.defined() ? -weight * surrogate : -surrogate;

  // max(Σ mask, 1): an empty batch gives loss 0. A micro-batch divides by its step's count.
  const auto denom = options.token_denominator > 0 ? torch::full({}, options.token_denominator, mask.options())
                                                   : mask.sum().clamp_min(1.0);
  if (use_kl) {
    const auto kl_tok = klEstimate(logp, kept(logp_ref), options.kl_estimator);
    loss_tok = loss_tok + options.kl_coef * kl_tok;
    result.kl = ((kl_tok.detach() * mask).sum() / denom).item<double>();
  }
  result.loss = (loss_tok * mask).sum() / denom;

  // The clip is active where the clipped term is the smaller one, i.e. it was selected and
  // differs from the unclipped term.
  result.clipped_tokens = (keep & (surr_clipped.detach() < surr_unclipped.detach())).sum().item<std::int64_t>();
  result.clipped_fraction =
      result.kept_tokens > 0 ? static_cast<double>(result.clipped_tokens) / result.kept_tokens : 0.0;
  return result;
}

torch::Tensor keptTokenMask(const PolicyLossInputs& in, const PolicyLossOptions& options, PolicyLossResult& result) {
  torch::NoGradGuard no_grad;
  const auto bt = in.mask.sizes();
  const auto advantages = in.advantages.detach().unsqueeze(1).expand(bt);
  // Non-finite inputs from outside the trainer (engine log-probs, rewards) drop their tokens
  // instead of poisoning the batch; they are counted so the caller can report them.
  auto finite = torch::isfinite(in.logp_behav) & torch::isfinite(advantages);
  if (options.decoupled) finite = finite & torch::isfinite(in.logp_prox);
  if (options.kl_coef > 0) finite = finite & torch::isfinite(in.logp_ref);
  const auto dtype = in.logp.defined() ? in.logp.scalar_type() : torch::kFloat;
  auto m = in.mask.detach().to(dtype);
  result.nonfinite_tokens = ((m != 0) & ~finite).sum().item<std::int64_t>();
  m = torch::where(finite, m, torch::zeros_like(m));
  if (options.m2po) {
    const auto before = (m != 0).sum().item<std::int64_t>();
    m = m2poMask(in.logp, in.logp_behav.detach(), m, options.m2_threshold);
    const auto after = (m != 0).sum().item<std::int64_t>();
    result.m2po_masked_tokens = before - after;
    result.m2po_masked_fraction = before > 0 ? static_cast<double>(before - after) / before : 0.0;
  }
  return m;
}

torch::Tensor tokenLogProbs(const torch::Tensor& logits, const torch::Tensor& tokens) {
  if (!logits.defined() || logits.dim() != 3)
    throw std::invalid_argument("tokenLogProbs: logits has shape " + shapeOf(logits) + ", expected [B,T,V]");
  requireShape("tokenLogProbs", tokens, "tokens", logits.sizes().slice(0, 2), "[B,T] of logits");
  if (tokens.scalar_type() != torch::kLong) throw std::invalid_argument("tokenLogProbs: tokens must be int64");
  const auto vocab = logits.size(2);
  if (tokens.numel() > 0 && (tokens.min().item<std::int64_t>() < 0 || tokens.max().item<std::int64_t>() >= vocab))
    throw std::invalid_argument("tokenLogProbs: tokens out of range [0, " + std::to_string(vocab) + ")");
  // float32 whatever the model's dtype: bf16 log-softmax loses the precision the ratio needs.
  return logits.to(torch::kFloat).log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}

torch::Tensor klEstimate(const torch::Tensor& logp, const torch::Tensor& logp_ref, KlEstimator estimator) {
  if (!logp.defined()) throw std::invalid_argument("klEstimate: logp is undefined");
  requireShape("klEstimate", logp_ref, "logp_ref", logp.sizes(), "same as logp");
  const auto ref = logp_ref.detach();  // the reference policy is frozen
  switch (estimator) {
    case KlEstimator::K1: return logp - ref;
    case KlEstimator::K3: {
      // Schulman's k3 = r − log r − 1 with r = π_ref/π_θ: unbiased and always ≥ 0.
      const auto log_r = ref - logp;
      return torch::exp(log_r) - log_r - 1.0;
    }
  }
  throw std::invalid_argument("klEstimate: unknown estimator");
}

}  // namespace astraflow
