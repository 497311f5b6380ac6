// The tokens of an answer's cleaned LaTeX (math_tokens.hpp).
#include "tasks/math_tokens.hpp"

#include <cctype>

#include "tasks/math_value.hpp"

namespace astraflow::math {

bool isFunction(std::string_view name) {
  for (const char* f : {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
                        "ln", "log", "exp"})
    if (name == f) return true;
  return false;
}
bool isGreek(std::string_view name) {
  for (const char* g : {"alpha",    "beta",    "gamma", "delta",  "epsilon", "varepsilon", "zeta",  "eta",   "theta",
                        "vartheta", "iota",    "kappa", "lambda", "mu",      "nu",         "xi",    "rho",   "sigma",
                        "tau",      "upsilon", "phi",   "varphi", "chi",     "psi",        "omega", "Gamma", "Delta",
                        "Theta",    "Lambda",  "Sigma", "Phi",    "Psi",     "Omega"})
    if (name == g) return true;
  return false;
}

namespace {

constexpr std::size_t kMaxDigits = 10'000;

// Digits at s[k..]: how many.
std::size_t digitRun(std::string_view s, std::size_t k) {
  std::size_t e = k;
  while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
  return e - k;
}

// A number at s[k] (a digit, or '.' before one): groups of three after `,` or a thin space join.
std::size_t readNumber(std::string_view s, std::size_t k, std::string& digits) {
  const std::size_t lead = digitRun(s, k);
  digits.assign(s.substr(k, lead));
  k += lead;
  if (lead >= 1 && lead <= 3)
    while (k + 4 <= s.size() && (s[k] == ',' || s[k] == kThinSpace) && digitRun(s, k + 1) == 3) {
      digits.append(s.substr(k + 1, 3));
      k += 4;
    }
  if (k + 1 < s.size() && s[k] == '.' && std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
    const std::size_t frac = digitRun(s, k + 1);
    digits += '.';
    digits.append(s.substr(k + 1, frac));
    k += 1 + frac;
  }
  if (digits.size() > kMaxDigits) throw Refused();
  return k;
}

}  // namespace

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  for (std::size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == ' ' || c == kThinSpace) {
      ++k;
    } else if (std::isdigit(c) ||
               (c == '.' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1])))) {
      Token t{Tok::Num, ""};
      k = readNumber(s, k, t.text);
      if (t.text.front() == '.') t.text.insert(0, "0");
      out.push_back(std::move(t));
    } else if (std::isalpha(c)) {
      std::size_t e = k;
      while (e < s.size() && std::isalpha(static_cast<unsigned char>(s[e]))) ++e;
      const std::string word(s.substr(k, e - k));
      k = e;
      if (isFunction(word) || word == "sqrt" || word == "pi") {
        out.push_back({Tok::Cmd, word});
      } else if (word.size() == 1) {
        out.push_back({Tok::Letter, word});
      } else if (isUnitWord(word) || word == "and" || word == "or") {
        out.push_back({Tok::Word, word});  // a unit after a number is dropped; and/or separate
      } else {  // any other run of letters is their product ("2xyz"), as math-verify reads it
        for (const char l : word) out.push_back({Tok::Letter, std::string(1, l)});
      }
    } else if (c == '\\') {
      if (k + 1 < s.size() && std::isalpha(static_cast<unsigned char>(s[k + 1]))) {
        std::size_t e = k + 1;
        while (e < s.size() && std::isalpha(static_cast<unsigned char>(s[e]))) ++e;
        out.push_back({Tok::Cmd, std::string(s.substr(k + 1, e - k - 1))});
        k = e;
      } else if (k + 1 < s.size() && (s[k + 1] == '\\' || s[k + 1] == '{' || s[k + 1] == '}')) {
        out.push_back({Tok::Op, std::string(s.substr(k, 2))});
        k += 2;
      } else {
        throw Refused();
      }
    } else if (std::string_view("+-*/^_=<>!%,;()[]{}|&.:'").find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back({Tok::Op, std::string(1, static_cast<char>(c))});
      ++k;
    } else {
      throw Refused();
    }
  }
  out.push_back({Tok::End, ""});
  return out;
}

}  // namespace astraflow::math
