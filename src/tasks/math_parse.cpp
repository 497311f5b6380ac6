// An answer's cleaned LaTeX (math_clean.cpp) read into a Value (math_value.hpp): a
// recursive-descent parser over its tokens (math_tokens.cpp) over the grammar of final answers — numbers (exact: a
// decimal is a rational, thousands groups joined), symbols, + - * / ^ with implicit products, \frac \sqrt \binom with
// or without braces (\frac94, \sqrt3), functions, |x|, n!, p%, \pm; relations; sets, tuples, intervals and their
// unions; matrices. Any other input is refused, and the reward compares it as text.
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "tasks/math_arith.hpp"
#include "tasks/math_tokens.hpp"
#include "tasks/math_value.hpp"

namespace astraflow::math {
namespace {

constexpr int kMaxDepth = 64;

}  // namespace

GiNaC::ex Symbols::get(const std::string& name) {
  auto it = symbols_.find(name);
  if (it == symbols_.end()) it = symbols_.emplace(name, GiNaC::symbol(name)).first;
  return it->second;
}

namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, Symbols& symbols) : t_(std::move(tokens)), symbols_(symbols) {}

  Value top() {
    if (peekLetter() && t_[at_ + 1].kind == Tok::Cmd && t_[at_ + 1].text == "in") at_ += 2;  // "x \in [1, 2]"
    std::vector<Value> items;
    for (;;) {
      items.push_back(item());
      skipUnits();
      if (isOp(",") || isOp(";") || isWord("and") || isWord("or")) {
        ++at_;
        continue;
      }
      break;
    }
    while (isOp(".")) ++at_;
    if (t_[at_].kind != Tok::End) throw Refused();
    if (items.size() == 1) return std::move(items[0]);
    Value set{ValueKind::Set};
    set.bare = true;
    set.items = std::move(items);
    return set;
  }

 private:
  const Token& peek() const { return t_[at_]; }
  bool isOp(std::string_view op) const { return t_[at_].kind == Tok::Op && t_[at_].text == op; }
  bool isCmd(std::string_view name) const { return t_[at_].kind == Tok::Cmd && t_[at_].text == name; }
  bool isWord(std::string_view w) const { return t_[at_].kind == Tok::Word && t_[at_].text == w; }
  bool peekLetter() const { return t_[at_].kind == Tok::Letter; }
  void expectOp(std::string_view op) {
    if (!isOp(op)) throw Refused();
    ++at_;
  }
  void skipUnits() {
    while (peek().kind == Tok::Word && peek().text != "and" && peek().text != "or") ++at_;
  }
  struct Depth {
    explicit Depth(int& d) : d_(d) {
      if (++d_ > kMaxDepth) throw Refused();
    }
    ~Depth() { --d_; }
    int& d_;
  };

  // One element of an answer: a set, a matrix, a tuple or interval (or a union of them), or a
  // relation or expression; \pm makes a set of its two values.
  Value item() {
    if (isOp("\\{")) return braceSet();
    if (isCmd("begin")) return matrix();
    if ((isOp("(") || isOp("[")) && tupleAhead()) {
      Value first = tuple();
      if (!isCmd("cup")) return first;
      Value u{ValueKind::Union};
      u.items.push_back(std::move(first));
      while (isCmd("cup")) {
        ++at_;
        if (!(isOp("(") || isOp("["))) throw Refused();
        u.items.push_back(tuple());
      }
      return u;
    }
    Value v = relation();
    const GiNaC::ex pm = symbols_.get("\\pm");
    if (v.kind == ValueKind::Expr && v.expr.has(pm)) {
      Value set{ValueKind::Set};
      for (const int sign : {1, -1}) {
        Value one = v;
        one.expr = v.expr.subs(pm == sign);
        set.items.push_back(std::move(one));
      }
      return set;
    }
    return v;
  }

  // Whether the bracket at at_ closes (with ')' or ']') after a top-level comma.
  bool tupleAhead() const {
    int depth = 0;
    bool comma = false;
    for (std::size_t k = at_; t_[k].kind != Tok::End; ++k) {
      if (t_[k].kind != Tok::Op) continue;
      const std::string& o = t_[k].text;
      if (o == "(" || o == "[" || o == "{" || o == "\\{") ++depth;
      if (o == ")" || o == "]" || o == "}" || o == "\\}") {
        if (--depth == 0) return comma && (o == ")" || o == "]");
      }
      if (o == "," && depth == 1) comma = true;
    }
    return false;
  }

  Value tuple() {
    Depth guard(depth_);
    Value t{ValueKind::Tuple};
    t.open = peek().text[0];
    ++at_;
    for (;;) {
      t.items.push_back(relation());
      if (isOp(",")) {
        ++at_;
        continue;
      }
      if (!(isOp(")") || isOp("]"))) throw Refused();
      t.close = peek().text[0];
      ++at_;
      return t;
    }
  }

  Value braceSet() {
    Depth guard(depth_);
    ++at_;
    Value s{ValueKind::Set};
    if (isOp("\\}")) throw Refused();  // the empty set: compared as text
    for (;;) {
      s.items.push_back(relation());
      if (isOp(",") || isOp(";")) {
        ++at_;
        continue;
      }
      expectOp("\\}");
      return s;
    }
  }

  // \begin{pmatrix} a & b \\ c & d \end{pmatrix} (any *matrix or array environment).
  Value matrix() {
    ++at_;
    const std::string env = bracedName();
    // A vmatrix is a determinant, not a matrix: compared as text.
    if ((env.find("matrix") == std::string::npos && env != "array") || env == "vmatrix" || env == "Vmatrix")
      throw Refused();
    if (env == "array" && isOp("{")) bracedName();  // the column spec
    Value m{ValueKind::Matrix};
    std::vector<Value> row;
    for (;;) {
      if (isCmd("end")) break;
      row.push_back(exprValue());
      if (isOp("&")) {
        ++at_;
        continue;
      }
      if (m.cols == 0) m.cols = static_cast<int>(row.size());
      if (static_cast<int>(row.size()) != m.cols) throw Refused();
      for (auto& cell : row) m.items.push_back(std::move(cell));
      row.clear();
      ++m.rows;
      if (isOp("\\\\")) {
        ++at_;
        if (isCmd("end")) break;  // a trailing row break
        continue;
      }
      if (!isCmd("end")) throw Refused();
    }
    ++at_;
    if (bracedName() != env || m.rows == 0) throw Refused();
    return m;
  }

  std::string bracedName() {
    expectOp("{");
    std::string name;
    while (!isOp("}")) {
      if (peek().kind == Tok::End) throw Refused();
      name += peek().text;
      ++at_;
    }
    ++at_;
    return name;
  }

  std::optional<RelOp> relOp() {
    if (isOp("=")) return ++at_, RelOp::Eq;
    if (isOp("<") || isCmd("lt")) {
      ++at_;
      if (isOp("=")) return ++at_, RelOp::Le;
      return RelOp::Lt;
    }
    if (isOp(">") || isCmd("gt")) {
      ++at_;
      if (isOp("=")) return ++at_, RelOp::Ge;
      return RelOp::Gt;
    }
    for (const char* le : {"le", "leq", "leqslant"})
      if (isCmd(le)) return ++at_, RelOp::Le;
    for (const char* ge : {"ge", "geq", "geqslant"})
      if (isCmd(ge)) return ++at_, RelOp::Ge;
    if (isCmd("ne") || isCmd("neq")) return ++at_, RelOp::Ne;
    return std::nullopt;
  }

  Value relation() {
    Value left = exprValue();
    const auto op = relOp();
    if (!op) return left;
    Value right = exprValue();
    if (relOp()) throw Refused();  // chains (1 < x < 3): text
    Value r{ValueKind::Relation};
    r.lhs = left.expr;
    r.expr = right.expr;
    r.op = *op;
    r.inexact = left.inexact || right.inexact;
    return r;
  }

  Value exprValue() {
    inexact_ = false;
    percent_ = false;
    const std::size_t start = at_;
    Value v{ValueKind::Expr};
    v.expr = expr();
    v.inexact = inexact_ && oneNumber(start, at_);
    v.percent = percent_;
    skipUnits();
    return v;
  }

  // Whether tokens [from, to) are one number with a sign or a percent at most ("-2.5", "12.5%").
  bool oneNumber(std::size_t from, std::size_t to) const {
    int numbers = 0;
    for (std::size_t k = from; k < to; ++k) {
      const Token& t = t_[k];
      if (t.kind == Tok::Num) {
        ++numbers;
      } else if (t.kind != Tok::Op || (t.text != "-" && t.text != "+" && t.text != "%")) {
        return false;
      }
    }
    return numbers == 1;
  }

  GiNaC::ex expr() {
    Depth guard(depth_);
    GiNaC::ex sum;
    bool first = true;
    for (;;) {
      GiNaC::ex sign = 1;
      if (isOp("+")) {
        ++at_;
      } else if (isOp("-")) {
        ++at_;
        sign = -1;
      } else if (isCmd("pm") || isCmd("mp")) {
        sign = isCmd("pm") ? symbols_.get("\\pm") : -symbols_.get("\\pm");
        ++at_;
      } else if (!first) {
        return sum;
      }
      sum = first ? sign * term() : sum + sign * term();
      first = false;
    }
  }

  bool startsFactor() const {
    const Token& t = peek();
    if (t.kind == Tok::Num || t.kind == Tok::Letter) return true;
    if (t.kind == Tok::Op) return t.text == "(" || t.text == "{";
    if (t.kind == Tok::Cmd)
      return t.text == "frac" || t.text == "sqrt" || t.text == "binom" || t.text == "pi" || t.text == "infty" ||
             isGreek(t.text) || isFunction(t.text);
    return false;
  }

  GiNaC::ex term() {
    GiNaC::ex product = factor();
    for (;;) {
      if (isOp("*") || isCmd("cdot") || isCmd("times") || isCmd("ast")) {
        ++at_;
        product = product * factor();
      } else if (isOp("/") || isCmd("div")) {
        ++at_;
        const GiNaC::ex d = factor();
        if (d.is_zero()) throw Refused();
        product = product / d;
      } else if (startsFactor()) {
        // "2 500" is not 2 × 500: two numbers side by side are not an answer the grader reads.
        if (peek().kind == Tok::Num && at_ > 0 && t_[at_ - 1].kind == Tok::Num) throw Refused();
        product = product * factor();
      } else {
        return product;
      }
    }
  }

  GiNaC::ex factor() {
    if (isOp("-")) {
      ++at_;
      return -factor();
    }
    if (isOp("+")) {
      ++at_;
      return factor();
    }
    GiNaC::ex base = postfix(primary());
    if (!isOp("^")) return base;
    ++at_;
    return boundedPower(base, argument(true));
  }

  GiNaC::ex postfix(GiNaC::ex value) {
    for (;;) {
      if (isOp("!")) {
        ++at_;
        value = GiNaC::factorial(spend(boundedInteger(value)));
      } else if (isOp("%")) {
        ++at_;
        // A percent that ends the item is kept as such (p% is p/100, and an integer p% is also
        // p: math-verify's rule); one inside an expression divides by 100.
        const Token& n = peek();
        const bool ends = n.kind == Tok::End || n.kind == Tok::Word ||
                          (n.kind == Tok::Op && (n.text == "," || n.text == ";" || n.text == "." || n.text == ")" ||
                                                 n.text == "]" || n.text == "\\}"));
        if (ends && groups_ == 0 && !percent_) {
          percent_ = true;
        } else {
          value = value / 100;
        }
      } else if (isOp("'")) {
        throw Refused();  // derivatives: text
      } else {
        return value;
      }
    }
  }

  GiNaC::ex number(const std::string& digits) {
    const auto dot = digits.find('.');
    if (dot == std::string::npos) return GiNaC::numeric(digits.c_str());
    inexact_ = true;
    const std::string whole = digits.substr(0, dot) + digits.substr(dot + 1);
    return GiNaC::numeric(whole.c_str()) / GiNaC::pow(GiNaC::numeric(10), static_cast<long>(digits.size() - dot - 1));
  }

  // The argument of \frac, \sqrt, ^ and _: a brace group, or one character ("\frac94", "x^2")
  // or one command ("\sqrt\pi").
  GiNaC::ex argument(bool allow_sign = false) {
    Depth guard(depth_);
    if (isOp("{")) {
      ++at_;
      GiNaC::ex e = expr();
      expectOp("}");
      return e;
    }
    if (allow_sign && isOp("-")) {
      ++at_;
      return -argument();
    }
    Token& t = t_[at_];
    if (t.kind == Tok::Num) {
      // "\sqrt2.25", "x^2.5": LaTeX takes one character and leaves ".25" after it — not read.
      if (t.text.find('.') != std::string::npos) throw Refused();
      if (t.text.size() == 1 || allow_sign) {  // x^{23} written x^23 is read as 23
        ++at_;
        return GiNaC::numeric(t.text.c_str());
      }
      const std::string one = t.text.substr(0, 1);
      t.text.erase(0, 1);  // "\frac94": 9, then 4
      return GiNaC::numeric(one.c_str());
    }
    if (t.kind == Tok::Letter || t.kind == Tok::Cmd) return primary();
    throw Refused();
  }

  GiNaC::ex primary() {
    Depth guard(depth_);
    const Token t = peek();
    ++at_;
    switch (t.kind) {
      case Tok::Num: return number(t.text);
      case Tok::Letter: return letter(t.text);
      case Tok::Cmd: return command(t.text);
      case Tok::Op:
        if (t.text == "(" || t.text == "[" || t.text == "{") {
          ++groups_;
          GiNaC::ex e = expr();
          expectOp(t.text == "(" ? ")" : t.text == "[" ? "]" : "}");
          --groups_;
          return e;
        }
        if (t.text == "|") {
          ++groups_;
          GiNaC::ex e = expr();
          expectOp("|");
          --groups_;
          return GiNaC::abs(e);
        }
        throw Refused();
      default: throw Refused();
    }
  }

  GiNaC::ex letter(const std::string& name) {
    // Letters compare without case, as math-verify reads them ("X + 1" is "x + 1").
    std::string lower(1, static_cast<char>(std::tolower(static_cast<unsigned char>(name[0]))));
    if (isOp("_")) {
      ++at_;
      std::ostringstream sub;
      sub << argument();
      return symbols_.get(lower + "_" + sub.str());
    }
    if (lower == "e") return GiNaC::exp(GiNaC::ex(1));
    return symbols_.get(lower);
  }

  GiNaC::ex command(const std::string& name) {
    if (name == "frac") {
      const GiNaC::ex n = argument();
      const GiNaC::ex d = argument();
      if (d.is_zero()) throw Refused();
      return n / d;
    }
    if (name == "sqrt") {
      GiNaC::ex index = 2;
      if (isOp("[")) {
        ++at_;
        index = expr();
        expectOp("]");
        if (index.is_zero()) throw Refused();
      }
      return boundedPower(argument(), 1 / index);
    }
    if (name == "binom") {
      const GiNaC::ex n = spend(boundedInteger(argument())), k = boundedInteger(argument());
      return GiNaC::binomial(GiNaC::ex_to<GiNaC::numeric>(n), GiNaC::ex_to<GiNaC::numeric>(k));
    }
    if (name == "pi") return GiNaC::Pi;
    if (name == "infty" || name == "infin") return symbols_.get("\\infty");
    if (isGreek(name)) return symbols_.get(name);
    if (isFunction(name)) return function(name);
    throw Refused();
  }

  // \sin x, \sin^2 x, \sin(x), \log_2 8, \ln x.
  GiNaC::ex function(const std::string& name) {
    GiNaC::ex power = 1, base = 0;
    if (isOp("^")) {
      ++at_;
      power = argument(true);
    }
    if (name == "log" && isOp("_")) {
      ++at_;
      base = argument();
    }
    const GiNaC::ex x = isOp("(") ? primary() : functionArgument();
    if (name == "log" && !base.is_zero()) return boundedPower(GiNaC::log(x) / GiNaC::log(base), power);
    if (power.is_equal(-1) && (name == "sin" || name == "cos" || name == "tan"))
      return applyFunction("arc" + name, x);  // \sin^{-1} x is arcsin x
    return boundedPower(applyFunction(name, x), power);
  }

  // A function's argument without parentheses: its implicit product up to the next operator or
  // function ("\sin 2x" is sin(2x); "\sin x \cos x" is sin(x)·cos(x)).
  GiNaC::ex functionArgument() {
    GiNaC::ex x = factor();
    while (startsFactor() && !(peek().kind == Tok::Cmd && isFunction(peek().text))) {
      if (peek().kind == Tok::Num && t_[at_ - 1].kind == Tok::Num) throw Refused();
      x = x * factor();
    }
    return x;
  }

  // Factorials and binomials of an answer share a budget: 500 copies of 10000! are refused too.
  const GiNaC::ex& spend(const GiNaC::ex& n) {
    budget_ -= GiNaC::ex_to<GiNaC::numeric>(n).to_double();
    if (budget_ < 0) throw Refused();
    return n;
  }

  std::vector<Token> t_;
  std::size_t at_ = 0;
  Symbols& symbols_;
  int depth_ = 0;
  int groups_ = 0;  // brackets open around the current token
  double budget_ = 20'000;
  bool inexact_ = false;
  bool percent_ = false;
};

// Only letters and spaces, a word of two letters or more among them: "Yes", "\text{No}", "no
// solution". (math-verify reads "xy" as x·y, equal to "yx"; here it is text, so "No" is not "On".)
std::optional<std::string> wordsOnly(std::string_view s) {
  std::string out;
  bool word = false;
  std::size_t run = 0;
  for (const char c : s) {
    if (c == ' ' || c == kThinSpace) {
      run = 0;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(c))) return std::nullopt;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (++run >= 2) word = true;
  }
  if (!word) return std::nullopt;
  return out;
}

}  // namespace

std::optional<Value> parseAnswer(std::string_view latex, Symbols& symbols) {
  const std::string clean = cleanLatex(latex);
  if (clean.empty()) return std::nullopt;
  if (const auto words = wordsOnly(clean)) {
    Value text{ValueKind::Text};
    text.text = *words;
    return text;
  }
  try {
    Parser parser(tokenize(clean), symbols);
    return parser.top();
  } catch (const Refused&) {
    return std::nullopt;
  } catch (const std::exception&) {  // GiNaC's own refusals (a pole, an overflow)
    return std::nullopt;
  }
}

}  // namespace astraflow::math
