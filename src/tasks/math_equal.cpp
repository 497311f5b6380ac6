// When two answers are the same mathematics (docs/tasks.md, "math"): values from math_parse.cpp
// compared by kind. Numbers are exact rationals compared exactly; other numbers by their
// difference at 40 and 80 digits (rounding noise shrinks with the precision, a true difference
// does not); an answer written as one decimal is compared rounded to `decimals` places
// (math-verify's float_rounding). Expressions with symbols are equal when GiNaC reduces their
// difference to zero, or when it vanishes at four points of both signs where every symbol takes
// an unrelated value (a polynomial identity test; a difference that is not zero vanishes at all
// four only by a coincidence of measure zero).
#include <cln/rational.h>
#include <cln/real.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "astraflow/tasks/reward.hpp"
#include "tasks/math_value.hpp"

namespace astraflow::math {
namespace {

bool hasSymbols(const GiNaC::ex& e) {
  if (GiNaC::is_a<GiNaC::symbol>(e)) return true;
  for (std::size_t i = 0; i < e.nops(); ++i)
    if (hasSymbols(e.op(i))) return true;
  return false;
}

// Whether expanding e is an answer's work: its total degree bounded by kMaxExpandDegree, and no
// power of a sum past kMaxSumPower ((a+b+c+d)^{64} has 47,905 terms). Past either, only the points
// decide.
constexpr double kMaxExpandDegree = 64;
constexpr double kMaxSumPower = 8;
double degreeBound(const GiNaC::ex& e, bool& sums_ok) {
  if (GiNaC::is_a<GiNaC::symbol>(e)) return 1;
  if (GiNaC::is_a<GiNaC::numeric>(e) || GiNaC::is_a<GiNaC::constant>(e)) return 0;
  if (GiNaC::is_a<GiNaC::power>(e)) {
    const GiNaC::ex exponent = e.op(1);
    const double base = degreeBound(e.op(0), sums_ok);
    if (!GiNaC::is_a<GiNaC::numeric>(exponent)) return base == 0 ? degreeBound(exponent, sums_ok) : 1e9;
    const double power = std::abs(GiNaC::ex_to<GiNaC::numeric>(exponent).to_double());
    if (GiNaC::is_a<GiNaC::add>(e.op(0)) && base > 0 && power > kMaxSumPower) sums_ok = false;
    return base * power;
  }
  double sum = 0, most = 0;
  for (std::size_t i = 0; i < e.nops(); ++i) {
    const double d = degreeBound(e.op(i), sums_ok);
    sum += d;
    most = std::max(most, d);
  }
  return GiNaC::is_a<GiNaC::mul>(e) ? sum : most;
}
bool expandable(const GiNaC::ex& e) {
  bool sums_ok = true;
  return degreeBound(e, sums_ok) <= kMaxExpandDegree && sums_ok;
}

std::optional<GiNaC::numeric> numericValue(const GiNaC::ex& e) {
  const GiNaC::ex v = e.evalf();
  if (!GiNaC::is_a<GiNaC::numeric>(v)) return std::nullopt;
  return GiNaC::ex_to<GiNaC::numeric>(v);
}

// round(x · 10^decimals), for a real x.
std::optional<cln::cl_I> rounded(const GiNaC::ex& x, int decimals) {
  const GiNaC::ex scaled = x * GiNaC::pow(GiNaC::numeric(10), decimals);
  GiNaC::numeric n;
  if (GiNaC::is_a<GiNaC::numeric>(scaled) && GiNaC::ex_to<GiNaC::numeric>(scaled).is_rational()) {
    n = GiNaC::ex_to<GiNaC::numeric>(scaled);
  } else if (const auto v = numericValue(scaled); v && v->is_real()) {
    n = *v;
  } else {
    return std::nullopt;
  }
  return cln::floor1(cln::the<cln::cl_R>(n.to_cl_N()) + cln::cl_RA(1) / 2);
}

// The symbols' values at probe point `point` (0–3), at the current precision: spread over
// [0.6, 6], of both signs (|x| is not x, sqrt(x^2) is not x), a different value per symbol.
GiNaC::exmap pointValues(const Symbols& symbols, int point) {
  GiNaC::exmap values;
  int j = 0;
  for (const auto& [name, symbol] : symbols.all()) {
    const GiNaC::numeric magnitude(6180 + 3719 * j + 11003 * point, 9973);
    values[symbol] = ((point + j) % 2 == 1 ? -magnitude : magnitude).evalf();
    ++j;
  }
  return values;
}

// a = b as numbers (at a probe point when `point` >= 0): their difference evaluated at 40 and at
// 80 digits is rounding noise — at most 10^-60 of their size at 80 digits, and shrinking with
// the precision — where a true difference (10^{30}+\sqrt2 against 10^{30}) stays as it is.
bool numericallyEqual(const GiNaC::ex& a, const GiNaC::ex& b, const Symbols& symbols, int point) {
  GiNaC::numeric noise[2], scale;
  for (int k = 0; k < 2; ++k) {
    GiNaC::Digits = k == 0 ? 40 : 80;
    const GiNaC::exmap values = point >= 0 ? pointValues(symbols, point) : GiNaC::exmap{};
    const auto va = numericValue(a.subs(values)), vb = numericValue(b.subs(values));
    const auto d = numericValue((a - b).subs(values));
    if (!va || !vb || !d) return false;
    noise[k] = GiNaC::abs(*d);
    scale = std::max({GiNaC::numeric(1), GiNaC::abs(*va), GiNaC::abs(*vb)});
  }
  GiNaC::Digits = 40;
  if (noise[1].is_zero()) return true;
  const GiNaC::numeric tiny = GiNaC::ex_to<GiNaC::numeric>(GiNaC::pow(GiNaC::numeric(10), -60).evalf());
  return noise[1] <= tiny * scale && (noise[0].is_zero() || noise[1] <= noise[0] * GiNaC::numeric(1, 100000000));
}

// a = b at four points where every symbol takes a value unrelated to the others': a polynomial
// identity test, which a difference that is not zero passes only by a coincidence of measure zero.
bool equalAtPoints(const GiNaC::ex& a, const GiNaC::ex& b, const Symbols& symbols) {
  for (int point = 0; point < 4; ++point)
    if (!numericallyEqual(a, b, symbols, point)) return false;
  return true;
}

// An answer written as one decimal (0.333333, -2.5, 12.5%) is compared rounded to `decimals`
// places, as math-verify rounds its floats; nor for a decimal inside an expression (1.5 × 10^{-8}
// is exact). Where the values are within a thousand units of the last place of 0, rounding would
// merge values apart by their own size (0.0000005 and 0.0000014): there they must also agree to
// 0.1 % (0.0000001 is not 0).
bool roundedEqual(const GiNaC::ex& a, const GiNaC::ex& b, int decimals) {
  const auto ra = rounded(a, decimals), rb = rounded(b, decimals);
  if (!ra || !rb || *ra != *rb) return false;
  const auto va = numericValue(a), vb = numericValue(b);
  if (!va || !vb) return false;
  const GiNaC::numeric size = std::max(GiNaC::abs(*va), GiNaC::abs(*vb));
  const GiNaC::numeric small = GiNaC::ex_to<GiNaC::numeric>(GiNaC::pow(GiNaC::numeric(10), 3 - decimals));
  return size >= small || GiNaC::abs(*va - *vb) <= size / 1000;
}

bool exprEqual(const GiNaC::ex& a, const GiNaC::ex& b, bool inexact, int decimals, const Symbols& symbols) {
  if (a.is_equal(b)) return true;
  if (!hasSymbols(a) && !hasSymbols(b)) {
    if (inexact) return roundedEqual(a, b, decimals);
    const bool rational_a = GiNaC::is_a<GiNaC::numeric>(a) && GiNaC::ex_to<GiNaC::numeric>(a).is_rational();
    const bool rational_b = GiNaC::is_a<GiNaC::numeric>(b) && GiNaC::ex_to<GiNaC::numeric>(b).is_rational();
    if (rational_a && rational_b) return false;  // exact and not equal
    return numericallyEqual(a, b, symbols, -1);
  }
  if (expandable(a) && expandable(b) && (a - b).expand().normal().is_zero()) return true;
  return equalAtPoints(a, b, symbols);
}

bool isInteger(const GiNaC::ex& e) {
  return GiNaC::is_a<GiNaC::numeric>(e) && GiNaC::ex_to<GiNaC::numeric>(e).is_integer();
}

bool numbersEqual(const Value& a, const Value& g, int decimals, const Symbols& symbols) {
  const bool inexact = a.inexact || g.inexact;
  if (a.percent == g.percent) return exprEqual(a.expr, g.expr, inexact, decimals, symbols);
  const Value& p = a.percent ? a : g;  // p% is p/100; an integer p% is also p (math-verify's rule)
  const Value& q = a.percent ? g : a;
  if (exprEqual(p.expr / 100, q.expr, inexact, decimals, symbols)) return true;
  return isInteger(p.expr) && isInteger(q.expr) && p.expr.is_equal(q.expr);
}

RelOp flipped(RelOp op) {
  switch (op) {
    case RelOp::Lt: return RelOp::Gt;
    case RelOp::Gt: return RelOp::Lt;
    case RelOp::Le: return RelOp::Ge;
    case RelOp::Ge: return RelOp::Le;
    default: return op;
  }
}

bool equalValues(const Value& a, const Value& g, int decimals, const Symbols& symbols);

bool relationsEqual(const Value& a, const Value& g, int decimals, const Symbols& symbols) {
  const bool inexact = a.inexact || g.inexact;
  auto eq = [&](const GiNaC::ex& x, const GiNaC::ex& y) { return exprEqual(x, y, inexact, decimals, symbols); };
  if (a.op == g.op && eq(a.lhs, g.lhs) && eq(a.expr, g.expr)) return true;
  if (flipped(a.op) == g.op && eq(a.lhs, g.expr) && eq(a.expr, g.lhs)) return true;
  return false;
}

// Every element of one matched by a different element of the other.
bool unorderedEqual(const std::vector<Value>& a, const std::vector<Value>& g, int decimals, const Symbols& symbols) {
  if (a.size() != g.size() || a.size() > 64) return false;
  std::vector<bool> used(g.size(), false);
  for (const Value& x : a) {
    bool found = false;
    for (std::size_t k = 0; k < g.size() && !found; ++k)
      if (!used[k] && equalValues(x, g[k], decimals, symbols)) used[k] = found = true;
    if (!found) return false;
  }
  return true;
}

bool orderedEqual(const std::vector<Value>& a, const std::vector<Value>& g, int decimals, const Symbols& symbols) {
  if (a.size() != g.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!equalValues(a[k], g[k], decimals, symbols)) return false;
  return true;
}

// "x = 3" read as 3 where the other side is a value.
const GiNaC::ex* assignedValue(const Value& v) {
  if (v.kind != ValueKind::Relation || v.op != RelOp::Eq) return nullptr;
  if (GiNaC::is_a<GiNaC::symbol>(v.lhs)) return &v.expr;
  if (GiNaC::is_a<GiNaC::symbol>(v.expr)) return &v.lhs;
  return nullptr;
}

bool equalValues(const Value& a, const Value& g, int decimals, const Symbols& symbols) {
  if (a.kind == ValueKind::Expr && g.kind == ValueKind::Expr) return numbersEqual(a, g, decimals, symbols);
  if (a.kind == ValueKind::Relation && g.kind == ValueKind::Relation) return relationsEqual(a, g, decimals, symbols);
  if (a.kind == ValueKind::Relation && g.kind == ValueKind::Expr) {
    const GiNaC::ex* v = assignedValue(a);
    return v && exprEqual(*v, g.expr, a.inexact || g.inexact, decimals, symbols);
  }
  if (a.kind == ValueKind::Expr && g.kind == ValueKind::Relation) {
    const GiNaC::ex* v = assignedValue(g);
    return v && exprEqual(a.expr, *v, a.inexact || g.inexact, decimals, symbols);
  }
  // A set gold takes its elements in any order, from a set, a list or a tuple (a, b) — not from an
  // interval [a, b).
  if (g.kind == ValueKind::Set && (a.kind == ValueKind::Set || (a.kind == ValueKind::Tuple && a.open == '(')))
    return unorderedEqual(a.items, g.items, decimals, symbols);
  if (g.kind == ValueKind::Tuple && a.kind == ValueKind::Set && a.bare && g.open == '(')
    return orderedEqual(a.items, g.items, decimals, symbols);  // "1, 2" for (1, 2)
  if (g.kind == ValueKind::Tuple && a.kind == ValueKind::Tuple)
    return a.open == g.open && a.close == g.close && orderedEqual(a.items, g.items, decimals, symbols);
  if (g.kind == ValueKind::Union && a.kind == ValueKind::Union)
    return unorderedEqual(a.items, g.items, decimals, symbols);
  if (g.kind == ValueKind::Matrix && a.kind == ValueKind::Matrix)
    return a.rows == g.rows && a.cols == g.cols && orderedEqual(a.items, g.items, decimals, symbols);
  if (g.kind == ValueKind::Text && a.kind == ValueKind::Text) return a.text == g.text;
  return false;
}

// What is compared when either side cannot be read: the cleaned text, without spaces or case.
std::string plainText(std::string_view s) {
  std::string out;
  for (const char c : cleanLatex(s))
    if (c != ' ' && c != '\x01') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

}  // namespace astraflow::math

namespace astraflow {

bool mathAnswersEqual(std::string_view answer, std::string_view reference, int decimals) {
  if (answer.size() > kMathRuleMaxChars || reference.size() > kMathRuleMaxChars)
    return math::cleanLatex(answer) == math::cleanLatex(reference);
  // GiNaC's expressions share reference-counted nodes without atomics: one grader at a time in
  // a process (an item takes tens of microseconds; docs/performance.md).
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  GiNaC::Digits = 40;
  math::Symbols symbols;
  try {
    const auto gold = math::parseAnswer(reference, symbols);
    const auto given = math::parseAnswer(answer, symbols);
    if (gold && given) return math::equalValues(*given, *gold, decimals, symbols);
  } catch (const std::exception&) {  // GiNaC's refusals while comparing (a pole at a point)
    return false;
  }
  const std::string a = math::plainText(answer), g = math::plainText(reference);
  return !g.empty() && a == g;
}

}  // namespace astraflow
