#pragma once
// The tokens of an answer's cleaned LaTeX (math_clean.cpp), which math_parse.cpp reads: numbers
// (thousands groups after `,` or a thin space joined), single letters, words, commands, operators.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace astraflow::math {

enum class Tok { Num, Letter, Word, Cmd, Op, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // Num: digits and '.'; Letter/Word/Cmd: the name; Op: the operator
};

// An answer the grader does not read as mathematics: the reward compares it as text.
struct Refused : std::runtime_error {
  Refused() : std::runtime_error("not an answer the grader reads") {}
};

// A thin space or `\,` between digit groups (math_clean.cpp writes it).
constexpr char kThinSpace = '\x01';

bool isFunction(std::string_view name);  // sin, cos, ..., ln, log, exp
bool isGreek(std::string_view name);     // alpha, ..., Omega

// The tokens of `s`, ending with an End token; throws Refused at a character no answer holds or
// a number past 10,000 digits.
std::vector<Token> tokenize(std::string_view s);

}  // namespace astraflow::math
