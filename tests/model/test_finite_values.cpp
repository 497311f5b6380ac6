// allFinite / allFiniteBits (model/finite_values.hpp) against torch::isfinite: every float dtype,
// a value of each kind (NaN, +inf, -inf, the largest finite, a subnormal) at random places, in
// contiguous tensors, strided views and a tensor past one scan block.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <random>

#include "astraflow/model/finite_values.hpp"

namespace astraflow {
namespace {

bool reference(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

TEST(FiniteValues, AgreesWithTorchOnEveryFloatTypeAndLayout) {
  std::mt19937_64 rng(7);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  for (const auto type : {torch::kHalf, torch::kBFloat16, torch::kFloat, torch::kDouble}) {
    // The largest finite value and a subnormal of the type stay finite.
    const auto info_max = type == torch::kHalf       ? 65504.0
                          : type == torch::kBFloat16 ? 3.3895313892515355e38
                          : type == torch::kFloat    ? static_cast<double>(std::numeric_limits<float>::max())
                                                     : std::numeric_limits<double>::max();
    for (const std::int64_t n : {1, 17, 1000, 70000, 300001}) {
      auto t = torch::randn({n}, torch::kDouble).to(type);
      t[0] = info_max;
      t[n / 2] = type == torch::kDouble ? 4.9e-324 : 1e-40;
      EXPECT_TRUE(allFinite(t)) << type << " n " << n;
      ASSERT_EQ(allFinite(t), reference(t));
      for (const double bad : specials) {
        auto u = t.clone();
        const auto at = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
        u[at] = bad;
        EXPECT_FALSE(allFinite(u)) << type << " n " << n << " at " << at << " value " << bad;
        EXPECT_EQ(allFinite(u), reference(u));
      }
    }
    // Strided: a transposed view is checked in slices; a bad value outside the view is not in it.
    auto m = torch::randn({300, 200}, torch::kDouble).to(type);
    m[5][199] = specials[0];
    const auto view = m.narrow(1, 0, 199).t();
    ASSERT_FALSE(view.is_contiguous());
    EXPECT_TRUE(allFinite(view)) << type;
    EXPECT_FALSE(allFinite(m.t())) << type;
    EXPECT_EQ(allFinite(m.t()), reference(m.t()));
  }
  EXPECT_TRUE(allFinite(torch::tensor(1.5)));
  EXPECT_FALSE(allFinite(torch::tensor(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(allFinite(torch::empty({0}, torch::kFloat)));
  EXPECT_TRUE(allFinite(torch::arange(10)));  // integers are always finite
}

}  // namespace
}  // namespace astraflow
