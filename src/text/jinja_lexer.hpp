#pragma once
// The tokens of a chat template: text between tags, tag delimiters, and the names, literals
// and operators inside tags.
#include <string>
#include <vector>

namespace astraflow::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // Text: the text after whitespace control; String: the decoded value
  int line;
};

std::vector<Token> lexTemplate(const std::string& source);

// Throws Error "chat template line N: what".
[[noreturn]] void syntaxError(int line, const std::string& what);

}  // namespace astraflow::jinja
