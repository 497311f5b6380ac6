// slicedAdamWStep (src/trainer/sliced_adamw.cpp) against torch::optim::AdamW::step itself: the
// same parameters and gradients stepped five times by each, with weight decay, slices cutting
// parameters in several places (and not at all): the weights and both moments equal bit for bit,
// and the state is AdamW's own (a step taken by one continues with the other).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "trainer/sliced_adamw.hpp"

using namespace astraflow;

namespace {

std::vector<torch::Tensor> parameters() {
  torch::manual_seed(21);
  return {torch::randn({1000, 33}), torch::randn({7}), torch::randn({3, 5, 11}), torch::randn({1})};
}

std::vector<torch::Tensor> leaves(const std::vector<torch::Tensor>& from) {
  std::vector<torch::Tensor> out;
  for (const auto& t : from) out.push_back(t.clone().requires_grad_(true));
  return out;
}

torch::optim::AdamWOptions options() {
  torch::optim::AdamWOptions o(3e-3);
  o.betas({0.9, 0.95});
  o.weight_decay(0.1);
  return o;
}

void setGradients(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(100 + step);
  for (auto& p : ps) p.mutable_grad() = torch::randn(p.sizes()) * (step + 1);
}

}  // namespace

TEST(SlicedAdamW, EqualsAdamWBitForBit) {
  for (const std::int64_t slice_bytes : {std::int64_t{4 * 1000}, std::int64_t{4 * 4096 + 12}, std::int64_t{1} << 30}) {
    auto ref = leaves(parameters()), got = leaves(parameters());
    torch::optim::AdamW ref_adam(ref, options()), got_adam(got, options());
    for (int step = 0; step < 5; ++step) {
      setGradients(ref, step);
      setGradients(got, step);
      ref_adam.step();
      slicedAdamWStep(got_adam, slice_bytes);
    }
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_TRUE(torch::equal(got[i], ref[i])) << "parameter " << i << ", slices of " << slice_bytes << " bytes";
      const auto& rs = static_cast<torch::optim::AdamWParamState&>(*ref_adam.state().at(ref[i].unsafeGetTensorImpl()));
      const auto& gs = static_cast<torch::optim::AdamWParamState&>(*got_adam.state().at(got[i].unsafeGetTensorImpl()));
      EXPECT_EQ(gs.step(), rs.step());
      EXPECT_TRUE(torch::equal(gs.exp_avg(), rs.exp_avg()));
      EXPECT_TRUE(torch::equal(gs.exp_avg_sq(), rs.exp_avg_sq()));
    }
  }
}

TEST(SlicedAdamW, ContinuesAdamWsOwnState) {
  auto ref = leaves(parameters()), got = leaves(parameters());
  torch::optim::AdamW ref_adam(ref, options()), got_adam(got, options());
  for (int step = 0; step < 4; ++step) {
    setGradients(ref, step);
    setGradients(got, step);
    ref_adam.step();
    if (step % 2 == 0) {
      got_adam.step();  // the state one makes, the other carries on
    } else {
      slicedAdamWStep(got_adam, 4 * 100);
    }
  }
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(torch::equal(got[i], ref[i])) << "parameter " << i;
  // A parameter without a gradient is left alone, as AdamW leaves it.
  auto idle = leaves(parameters());
  torch::optim::AdamW idle_adam(idle, options());
  slicedAdamWStep(idle_adam, 4 * 100);
  EXPECT_TRUE(idle_adam.state().empty());
}

TEST(SlicedAdamW, SumOfSquaresOverSlices) {
  torch::manual_seed(3);
  const auto t = torch::randn({513, 17});
  const double want = t.to(torch::kFloat64).pow(2).sum().item<double>();
  EXPECT_NEAR(slicedSumOfSquares(t, 4 * 100), want, 1e-5 * want);
  EXPECT_NEAR(slicedSumOfSquares(t), want, 1e-5 * want);
  EXPECT_EQ(slicedSumOfSquares(torch::zeros({0})), 0.0);
}
