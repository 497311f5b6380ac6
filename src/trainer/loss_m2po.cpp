// M2PO second-moment trust-region masking (docs/architecture.md §7; paper App. A, "m²-threshold").
#include <limits>
#include <sstream>
#include <stdexcept>

#include "astraflow/trainer/loss.hpp"

namespace astraflow {

torch::Tensor m2poMask(const torch::Tensor& logp, const torch::Tensor& logp_behav, const torch::Tensor& mask,
                       double threshold) {
  if (!logp.defined()) throw std::invalid_argument("m2poMask: logp is undefined");
  for (const auto& [t, name] : {std::pair{&logp_behav, "logp_behav"}, std::pair{&mask, "mask"}}) {
    if (!t->defined() || t->sizes() != logp.sizes()) {
      std::ostringstream os;
      os << "m2poMask: " << name << " has shape " << (t->defined() ? t->sizes() : torch::IntArrayRef{}) << ", expected "
         << logp.sizes() << " (same as logp)";
      throw std::invalid_argument(os.str());
    }
  }
  if (threshold != threshold) throw std::invalid_argument("m2poMask: threshold is NaN");

  torch::NoGradGuard no_grad;  // Δ carries no gradient
  const auto out_dtype = mask.is_floating_point() ? mask.scalar_type() : torch::kFloat;
  auto out = mask.detach().to(out_dtype).clone(at::MemoryFormat::Contiguous);
  const auto positions = (out != 0).reshape(-1).nonzero().squeeze(1);  // flat indices, ascending
  const auto n = positions.size(0);
  if (n == 0) return out;

  // One joint pool over the whole batch, not per sequence: the bound is on the batch's
  // second moment of Δ, which is what the loss (a token mean over the batch) sees.
  const auto delta = (logp.detach().to(torch::kDouble) - logp_behav.detach().to(torch::kDouble)).reshape(-1);
  auto d2 = delta.index_select(0, positions).square();
  // A non-finite Δ counts as the largest possible, so it is removed first.
  d2 = torch::where(torch::isfinite(d2), d2, torch::full_like(d2, std::numeric_limits<double>::infinity()));

  // Stable descending sort: among equal Δ², the token with the lower flat index goes first.
  const auto [sorted, order] = torch::sort(d2, /*stable=*/true, /*dim=*/0, /*descending=*/true);
  // kept_mean[k] = mean Δ² of the tokens left after removing the k largest.
  const auto suffix_sum = sorted.flip(0).cumsum(0).flip(0);
  const auto kept_mean = suffix_sum / torch::arange(n, 0, -1, d2.options());
  // Removing the largest Δ² never raises the mean, so the first k that meets the bound is the
  // fewest removals; none meets it → remove all.
  const auto meets = (kept_mean <= threshold).nonzero();
  const std::int64_t remove = meets.size(0) > 0 ? meets[0][0].item<std::int64_t>() : n;
  if (remove > 0) out.view(-1).index_fill_(0, positions.index_select(0, order.slice(0, 0, remove)), 0);
  return out;
}

}  // namespace astraflow
