#pragma once
// The syntax tree of a chat template (parsed by jinja_parser.cpp, rendered by jinja_render.cpp).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.hpp"

namespace astraflow::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // children: elements
    Tuple,     // children: elements
    Dict,      // children: key, value, key, value...
    Attr,      // children[0].name
    Item,      // children[0][children[1]]
    Slice,     // children[0][children[1]:children[2]:children[3]] (null parts left out)
    Call,      // children[0](children[1..], kwargs)
    Filter,    // children[0] | name(children[1..], kwargs)
    Test,      // children[0] is [not] name(children[1..])
    Unary,     // name: "-", "+", "not"; children[0]
    Binary,    // name: + - * / // % ** ~ == != < > <= >= in notin and or; children[0], children[1]
    Condition  // children[1] ? children[0] : children[2] (or undefined when there is no else)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, Block };
  Kind kind;
  int line = 0;
  std::string text;                  // Text: the text; Macro: the name; Set: the attribute of `set ns.attr`
  ExprPtr expr;                      // Output / Set: the value; For: the iterable
  ExprPtr condition;                 // For: the `if` filter of `for x in y if cond`
  std::vector<std::string> targets;  // For / Set: names (several: tuple unpacking); Macro: parameters
  std::vector<ExprPtr> defaults;     // Macro: parameter defaults (null where none)
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body); a null condition is the else
  Body body;                                       // For / SetBlock / Macro / Block ({% generation %})
  Body else_body;                                  // For: when the loop ran zero times
};

struct Template {
  Body body;
};

// Parses `source` as transformers compiles chat templates (trim_blocks, lstrip_blocks, the
// loop-controls extension, {% generation %}). Throws Error with the line for syntax errors and
// for tags, filters and tests this interpreter does not implement, named.
Template parseTemplate(const std::string& source);

}  // namespace astraflow::jinja

namespace astraflow::jinja {

// Renders `tpl` with `variables` (messages, tools, add_generation_prompt, special tokens, ...)
// and Jinja's and transformers' globals (namespace, range, dict, raise_exception,
// strftime_now). Throws Error for what the template raises and for type errors.
std::string renderTemplate(const Template& tpl, const Object& variables);

}  // namespace astraflow::jinja
