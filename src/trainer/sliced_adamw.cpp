// slicedAdamWStep (sliced_adamw.hpp): AdamW's update, written as torch::optim::AdamW::step
// writes it, element for element, over slices of each parameter.
#include "trainer/sliced_adamw.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

namespace astraflow {

void slicedAdamWStep(torch::optim::AdamW& adam, std::int64_t slice_bytes) {
  const torch::NoGradGuard no_grad;
  for (auto& group : adam.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) {
      adam.step();
      return;
    }
  }
  for (auto& group : adam.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const auto [beta1, beta2] = options.betas();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = adam.state()[p.unsafeGetTensorImpl()];
      if (!slot) {  // as AdamW makes it
        auto made = std::make_unique<torch::optim::AdamWParamState>();
        made->step(0);
        made->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        made->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(made);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      const double bias_correction1 = 1 - std::pow(beta1, state.step());
      const double bias_correction2 = 1 - std::pow(beta2, state.step());
      const double step_size = options.lr() / bias_correction1;
      // Flat views of the four tensors (all contiguous and alike: AdamW's state is made like p).
      const auto flat = [](const torch::Tensor& t) { return t.is_contiguous() ? t.view(-1) : torch::Tensor(); };
      auto param = flat(p), grad = flat(p.grad()), exp_avg = flat(state.exp_avg()),
           exp_avg_sq = flat(state.exp_avg_sq());
      if (!param.defined() || !grad.defined() || !exp_avg.defined() || !exp_avg_sq.defined()) {
        param = p, grad = p.grad(), exp_avg = state.exp_avg(), exp_avg_sq = state.exp_avg_sq();  // one slice
      }
      const auto n = param.dim() == 1 ? param.numel() : std::int64_t{0};
      const auto slice = std::max<std::int64_t>(1, slice_bytes / std::max<std::int64_t>(1, p.element_size()));
      for (std::int64_t begin = 0; begin < std::max<std::int64_t>(n, 1); begin += slice) {
        const auto cut = [&](const torch::Tensor& t) {
          return n > 0 ? t.narrow(0, begin, std::min(slice, n - begin)) : t;
        };
        auto ps = cut(param), gs = cut(grad), m = cut(exp_avg), v = cut(exp_avg_sq);
        if (options.weight_decay() != 0) ps.mul_(1 - options.lr() * options.weight_decay());
        m.mul_(beta1).add_(gs, 1 - beta1);
        v.mul_(beta2).addcmul_(gs, gs, 1 - beta2);
        const auto denom = (v.sqrt() / std::sqrt(bias_correction2)).add_(options.eps());
        ps.addcdiv_(m, denom, -step_size);
        if (n == 0) break;
      }
    }
  }
}

double slicedSumOfSquares(const torch::Tensor& t, std::int64_t slice_bytes) {
  const torch::NoGradGuard no_grad;
  const auto flat = t.reshape(-1);  // a view for the contiguous tensors gradients are
  const auto n = flat.numel();
  const auto slice = std::max<std::int64_t>(1, slice_bytes / std::max<std::int64_t>(1, t.element_size()));
  double sum = 0;
  for (std::int64_t begin = 0; begin < n; begin += slice) {
    sum += flat.narrow(0, begin, std::min(slice, n - begin)).pow(2).sum().item<double>();
  }
  return sum;
}

}  // namespace astraflow
