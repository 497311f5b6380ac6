// Bounded arithmetic for the math reward's parser (math_arith.hpp): what an answer may ask GiNaC
// to compute, and what is refused before it is computed.
#include "tasks/math_arith.hpp"

#include <cmath>
#include <map>

#include "tasks/math_tokens.hpp"

namespace astraflow::math {
namespace {

// A symbol's exponent past this is not an answer's (x^{100000}): refused, not expanded or probed.
constexpr int kMaxSymbolicExponent = 1000;

}  // namespace

GiNaC::ex boundedPower(const GiNaC::ex& base, const GiNaC::ex& exponent) {
  if (GiNaC::is_a<GiNaC::numeric>(exponent)) {
    const GiNaC::numeric e = GiNaC::ex_to<GiNaC::numeric>(exponent);
    if (!e.is_rational() || GiNaC::abs(e) > 100'000) throw Refused();
    if (GiNaC::is_a<GiNaC::numeric>(base)) {
      const GiNaC::numeric b = GiNaC::ex_to<GiNaC::numeric>(base);
      const double bits = b.is_rational() && !b.is_zero()
                              ? std::abs(e.to_double()) * (std::log2(std::abs(GiNaC::numer(b).to_double()) + 1) +
                                                           std::log2(std::abs(GiNaC::denom(b).to_double()) + 1))
                              : 0.0;
      if (!std::isfinite(bits) || bits > 100'000) throw Refused();
      if (b.is_zero() && e.is_negative()) throw Refused();
    }
  } else if (GiNaC::is_a<GiNaC::numeric>(base) && GiNaC::abs(GiNaC::ex_to<GiNaC::numeric>(base)) > 1e6) {
    throw Refused();  // a huge base to a symbolic power: nothing an answer needs
  }
  const GiNaC::ex power = GiNaC::pow(base, exponent);
  if (GiNaC::is_a<GiNaC::power>(power) && !GiNaC::is_a<GiNaC::numeric>(power.op(0)) &&
      GiNaC::is_a<GiNaC::numeric>(power.op(1)) &&
      GiNaC::abs(GiNaC::ex_to<GiNaC::numeric>(power.op(1))) > kMaxSymbolicExponent)
    throw Refused();
  return power;
}

GiNaC::ex boundedInteger(const GiNaC::ex& e) {
  if (!GiNaC::is_a<GiNaC::numeric>(e)) throw Refused();
  const GiNaC::numeric n = GiNaC::ex_to<GiNaC::numeric>(e);
  if (!n.is_nonneg_integer() || n > 10'000) throw Refused();
  return e;
}

// The function of that name (isFunction) at x; log is the natural logarithm.
GiNaC::ex applyFunction(const std::string& name, const GiNaC::ex& x) {
  using F = GiNaC::ex (*)(const GiNaC::ex&);
  static const std::map<std::string, F> kFunctions = {
      {"sin", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::sin(v); }},
      {"cos", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::cos(v); }},
      {"tan", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::tan(v); }},
      {"cot", [](const GiNaC::ex& v) -> GiNaC::ex { return 1 / GiNaC::tan(v); }},
      {"sec", [](const GiNaC::ex& v) -> GiNaC::ex { return 1 / GiNaC::cos(v); }},
      {"csc", [](const GiNaC::ex& v) -> GiNaC::ex { return 1 / GiNaC::sin(v); }},
      {"arcsin", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::asin(v); }},
      {"arccos", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::acos(v); }},
      {"arctan", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::atan(v); }},
      {"sinh", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::sinh(v); }},
      {"cosh", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::cosh(v); }},
      {"tanh", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::tanh(v); }},
      {"exp", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::exp(v); }},
      {"ln", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::log(v); }},
      {"log", [](const GiNaC::ex& v) -> GiNaC::ex { return GiNaC::log(v); }},
  };
  const auto it = kFunctions.find(name);
  if (it == kFunctions.end()) throw Refused();
  return it->second(x);
}

}  // namespace astraflow::math
