#pragma once
// The bounded arithmetic the math reward's parser builds values with (math_arith.cpp): powers,
// factorials and functions that are refused (math_tokens.hpp's Refused) rather than computed
// when an answer asks for what no answer needs. Private to src/tasks.
#include <ginac/ginac.h>

#include <string>

namespace astraflow::math {

// base^exponent; refuses a numeric power past ~10^5 bits, a symbol's power past 1,000 (nested
// powers fold: (x^{300})^{300} is x^{90000}), a huge base to a symbolic power, 0 to a negative one.
GiNaC::ex boundedPower(const GiNaC::ex& base, const GiNaC::ex& exponent);
// `e` when it is an integer from 0 to 10,000 (a factorial's or binomial's argument); else refused.
GiNaC::ex boundedInteger(const GiNaC::ex& e);
// The function of that name (isFunction) at x; log is the natural logarithm.
GiNaC::ex applyFunction(const std::string& name, const GiNaC::ex& x);

}  // namespace astraflow::math
