#pragma once
// A final answer read as mathematics (docs/tasks.md, "math"): a LaTeX or plain-text answer
// parsed into a value whose equality the `math` reward decides — an expression (GiNaC, exact
// rationals and radicals), a relation, a set, a tuple or interval, a union, a matrix, or text.
// Private to the tasks module: GiNaC's headers stay here.
#include <ginac/ginac.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace astraflow::math {

enum class ValueKind { Expr, Relation, Set, Tuple, Union, Matrix, Text };
enum class RelOp { Eq, Ne, Lt, Le, Gt, Ge };

struct Value {
  explicit Value(ValueKind k = ValueKind::Text) : kind(k) {}

  ValueKind kind;
  GiNaC::ex expr;  // Expr: the value (p for p%); Relation: the right side
  GiNaC::ex lhs;   // Relation: the left side
  RelOp op = RelOp::Eq;
  bool percent = false;      // Expr written as p% (expr holds p)
  bool inexact = false;      // one decimal number ("0.333333"): compared rounded (MathRewardOptions::decimals)
  bool bare = false;         // Set: a list without braces ("2, 3"), which a tuple gold may read in order
  std::vector<Value> items;  // Set, Tuple, Union elements; Matrix cells row by row
  char open = 0, close = 0;  // Tuple: its brackets, '(' or '[' and ')' or ']'
  int rows = 0, cols = 0;    // Matrix
  std::string text;          // Text: lower case, no spaces
};

// Symbols by name, shared by the two sides of one comparison (GiNaC symbols compare by identity).
class Symbols {
 public:
  GiNaC::ex get(const std::string& name);
  const std::map<std::string, GiNaC::symbol>& all() const { return symbols_; }

 private:
  std::map<std::string, GiNaC::symbol> symbols_;
};

// The answer as a value; nullopt when it cannot be read (then the reward compares text).
// Bounded: nesting past 64 levels, numbers past 10,000 digits and powers past ~10^5 bits are
// refused rather than computed, so no answer can make the grader hang or exhaust memory.
std::optional<Value> parseAnswer(std::string_view latex, Symbols& symbols);

// LaTeX presentation dropped from an answer (docs/tasks.md lists it): delimiters, \text-like
// wrappers, units, sizing and spacing commands, degrees, currency; thousands separators joined.
std::string cleanLatex(std::string_view raw);
// A word that names a unit ("cm", "dollars", "degrees"): after a number it is dropped.
bool isUnitWord(std::string_view word);

}  // namespace astraflow::math
