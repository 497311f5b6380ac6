// Parsing of chat templates into the tree of jinja_ast.hpp, by Jinja2's grammar and operator
// precedence. Only the tags, filters and tests the renderer implements are accepted; anything
// else is refused here, by name and line, before a conversation is rendered.
#include <fmt/format.h>

#include "text/jinja_ast.hpp"
#include "text/jinja_builtins.hpp"
#include "text/jinja_lexer.hpp"

namespace astraflow::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Template run() {
    Template tpl;
    std::string end_tag;
    tpl.body = parseBody({}, end_tag);
    return tpl;
  }

 private:
  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool isOp(const char* op, std::size_t ahead = 0) const {
    return peek(ahead).type == Tok::Op && peek(ahead).text == op;
  }
  bool isName(const char* name, std::size_t ahead = 0) const {
    return peek(ahead).type == Tok::Name && peek(ahead).text == name;
  }
  bool acceptOp(const char* op) {
    if (!isOp(op)) return false;
    ++i_;
    return true;
  }
  bool acceptName(const char* name) {
    if (!isName(name)) return false;
    ++i_;
    return true;
  }
  void expectOp(const char* op) {
    if (!acceptOp(op)) syntaxError(peek().line, fmt::format("expected '{}', found '{}'", op, peek().text));
  }
  std::string expectName() {
    if (peek().type != Tok::Name) syntaxError(peek().line, fmt::format("expected a name, found '{}'", peek().text));
    return next().text;
  }
  void expect(Tok type, const char* what) {
    if (peek().type != type) syntaxError(peek().line, fmt::format("expected {}", what));
    ++i_;
  }

  static ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  static NodePtr makeNode(Node::Kind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }

  // Statements up to one of `ends` (a block tag whose name is returned in end_tag, consumed up
  // to its name), or the end of the template when `ends` is empty.
  Body parseBody(const std::vector<std::string>& ends, std::string& end_tag) {
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.type == Tok::End) {
        if (!ends.empty()) syntaxError(tok.line, fmt::format("the template ends before '{{% {} %}}'", ends.back()));
        return body;
      }
      if (tok.type == Tok::Text) {
        auto n = makeNode(Node::Kind::Text, tok.line);
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (tok.type == Tok::VarBegin) {
        ++i_;
        auto n = makeNode(Node::Kind::Output, tok.line);
        n->expr = parseExpression();
        expect(Tok::VarEnd, "'}}'");
        body.push_back(std::move(n));
      } else {
        expect(Tok::BlockBegin, "a tag");
        const std::string name = peek().type == Tok::Name ? peek().text : "";
        for (const std::string& e : ends) {
          if (name == e) {
            ++i_;
            end_tag = name;
            return body;
          }
        }
        body.push_back(parseStatement());
      }
    }
  }

  NodePtr parseStatement() {
    const int line = peek().line;
    const std::string name = expectName();
    if (name == "if") return parseIf(line);
    if (name == "for") return parseFor(line);
    if (name == "set") return parseSet(line);
    if (name == "macro") return parseMacro(line);
    if (name == "break" || name == "continue") {
      expect(Tok::BlockEnd, "'%}'");
      return makeNode(name == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (name == "generation") {  // transformers' assistant-mask marker: renders its body
      expect(Tok::BlockEnd, "'%}'");
      auto n = makeNode(Node::Kind::Block, line);
      std::string end;
      n->body = parseBody({"endgeneration"}, end);
      expect(Tok::BlockEnd, "'%}'");
      return n;
    }
    syntaxError(line, fmt::format("tag '{}' is not supported (supported: if, for, set, macro, break, continue, "
                                  "generation)",
                                  name));
  }

  NodePtr parseIf(int line) {
    auto n = makeNode(Node::Kind::If, line);
    ExprPtr condition = parseExpression();
    while (true) {
      expect(Tok::BlockEnd, "'%}'");
      std::string end;
      Body body = parseBody({"elif", "else", "endif"}, end);
      n->branches.emplace_back(std::move(condition), std::move(body));
      if (end == "endif") break;
      if (end == "else") {
        expect(Tok::BlockEnd, "'%}'");
        Body else_body = parseBody({"endif"}, end);
        n->branches.emplace_back(nullptr, std::move(else_body));
        break;
      }
      condition = parseExpression();
    }
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parseFor(int line) {
    auto n = makeNode(Node::Kind::For, line);
    do n->targets.push_back(expectName());
    while (acceptOp(","));
    if (!acceptName("in")) syntaxError(line, "expected 'in' in the for tag");
    n->expr = parseExpression(false);
    if (acceptName("if")) n->condition = parseExpression(false);
    if (isName("recursive")) syntaxError(line, "recursive loops are not supported");
    expect(Tok::BlockEnd, "'%}'");
    std::string end;
    n->body = parseBody({"else", "endfor"}, end);
    if (end == "else") {
      expect(Tok::BlockEnd, "'%}'");
      n->else_body = parseBody({"endfor"}, end);
    }
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parseSet(int line) {
    std::vector<std::string> targets;
    std::string attribute;
    targets.push_back(expectName());
    if (acceptOp(".")) attribute = expectName();
    while (acceptOp(",")) targets.push_back(expectName());
    if (!acceptOp("=")) {
      if (targets.size() != 1 || !attribute.empty()) syntaxError(line, "a block set takes one name");
      expect(Tok::BlockEnd, "'%}'");
      auto n = makeNode(Node::Kind::SetBlock, line);
      n->targets = std::move(targets);
      std::string end;
      n->body = parseBody({"endset"}, end);
      expect(Tok::BlockEnd, "'%}'");
      return n;
    }
    auto n = makeNode(Node::Kind::Set, line);
    n->targets = std::move(targets);
    n->text = attribute;
    n->expr = parseTupleOrExpression();
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parseMacro(int line) {
    auto n = makeNode(Node::Kind::Macro, line);
    n->text = expectName();
    expectOp("(");
    while (!acceptOp(")")) {
      n->targets.push_back(expectName());
      n->defaults.push_back(acceptOp("=") ? parseExpression() : nullptr);
      if (!isOp(")")) expectOp(",");
    }
    expect(Tok::BlockEnd, "'%}'");
    std::string end;
    n->body = parseBody({"endmacro"}, end);
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  // a, b (a tuple without brackets, as `set a, b = 1, 2` allows) or one expression.
  ExprPtr parseTupleOrExpression() {
    ExprPtr first = parseExpression();
    if (!isOp(",")) return first;
    auto tuple = make(Expr::Kind::Tuple, first->line);
    tuple->children.push_back(std::move(first));
    while (acceptOp(",")) tuple->children.push_back(parseExpression());
    return tuple;
  }

  ExprPtr parseExpression(bool with_condition = true) {
    ExprPtr e = parseOr();
    if (with_condition && isName("if")) {
      ++i_;
      auto c = make(Expr::Kind::Condition, e->line);
      c->children.push_back(std::move(e));
      c->children.push_back(parseOr());
      if (acceptName("else")) c->children.push_back(parseExpression());
      return c;
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto b = make(Expr::Kind::Binary, left->line);
    b->name = std::move(op);
    b->children.push_back(std::move(left));
    b->children.push_back(std::move(right));
    return b;
  }

  ExprPtr parseOr() {
    ExprPtr e = parseAnd();
    while (acceptName("or")) e = binary("or", std::move(e), parseAnd());
    return e;
  }
  ExprPtr parseAnd() {
    ExprPtr e = parseNot();
    while (acceptName("and")) e = binary("and", std::move(e), parseNot());
    return e;
  }
  ExprPtr parseNot() {
    if (isName("not")) {
      auto u = make(Expr::Kind::Unary, next().line);
      u->name = "not";
      u->children.push_back(parseNot());
      return u;
    }
    return parseCompare();
  }
  ExprPtr parseCompare() {
    ExprPtr e = parseMath1();
    while (true) {
      std::string op;
      for (const char* candidate : {"==", "!=", "<=", ">=", "<", ">"})
        if (isOp(candidate)) op = candidate;
      if (!op.empty()) {
        ++i_;
      } else if (isName("in")) {
        ++i_;
        op = "in";
      } else if (isName("not") && isName("in", 1)) {
        i_ += 2;
        op = "notin";
      } else {
        return e;
      }
      e = binary(op, std::move(e), parseMath1());
    }
  }
  // One left-associative level: operands from `operand`, joined by any of `ops`.
  ExprPtr leftAssociative(std::initializer_list<const char*> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr e = (this->*operand)();
    while (true) {
      const char* op = nullptr;
      for (const char* candidate : ops)
        if (isOp(candidate)) op = candidate;
      if (op == nullptr) return e;
      ++i_;
      e = binary(op, std::move(e), (this->*operand)());
    }
  }
  ExprPtr parseMath1() { return leftAssociative({"+", "-"}, &Parser::parseConcat); }
  ExprPtr parseConcat() { return leftAssociative({"~"}, &Parser::parseMath2); }
  ExprPtr parseMath2() { return leftAssociative({"*", "/", "//", "%"}, &Parser::parsePow); }
  ExprPtr parsePow() { return leftAssociative({"**"}, &Parser::parseUnaryWithFilters); }
  ExprPtr parseUnaryWithFilters() { return parseUnary(true); }
  ExprPtr parseUnary(bool with_filter) {
    ExprPtr e;
    if (isOp("-") || isOp("+")) {
      auto u = make(Expr::Kind::Unary, peek().line);
      u->name = next().text;
      u->children.push_back(parseUnary(false));
      e = std::move(u);
    } else {
      e = parsePostfix(parsePrimary());
    }
    if (with_filter) return parseFilters(std::move(e));
    return e;
  }

  void parseArguments(Expr& call) {
    while (!acceptOp(")")) {
      if (peek().type == Tok::Name && isOp("=", 1)) {
        std::string key = next().text;
        ++i_;
        call.kwargs.emplace_back(std::move(key), parseExpression());
      } else {
        call.children.push_back(parseExpression());
      }
      if (!isOp(")")) expectOp(",");
    }
  }

  ExprPtr parsePrimary() {
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::String: {
        auto e = make(Expr::Kind::Literal, tok.line);
        e->value = next().text;
        return e;
      }
      case Tok::Int: {
        auto e = make(Expr::Kind::Literal, tok.line);
        e->value = static_cast<std::int64_t>(std::stoll(next().text));
        return e;
      }
      case Tok::Float: {
        auto e = make(Expr::Kind::Literal, tok.line);
        e->value = std::stod(next().text);
        return e;
      }
      case Tok::Name: {
        const std::string name = next().text;
        auto e = make(Expr::Kind::Literal, tok.line);
        if (name == "true" || name == "True")
          e->value = true;
        else if (name == "false" || name == "False")
          e->value = false;
        else if (name == "none" || name == "None")
          e->value = nullptr;
        else {
          e->kind = Expr::Kind::Name;
          e->name = name;
        }
        return e;
      }
      case Tok::Op: break;
      default: syntaxError(tok.line, "expected an expression");
    }
    const int line = tok.line;
    if (acceptOp("(")) {
      if (acceptOp(")")) return make(Expr::Kind::Tuple, line);
      ExprPtr first = parseExpression();
      if (acceptOp(")")) return first;
      auto tuple = make(Expr::Kind::Tuple, line);
      tuple->children.push_back(std::move(first));
      while (acceptOp(",")) {
        if (isOp(")")) break;
        tuple->children.push_back(parseExpression());
      }
      expectOp(")");
      return tuple;
    }
    if (acceptOp("[")) {
      auto list = make(Expr::Kind::List, line);
      while (!acceptOp("]")) {
        list->children.push_back(parseExpression());
        if (!isOp("]")) expectOp(",");
      }
      return list;
    }
    if (acceptOp("{")) {
      auto dict = make(Expr::Kind::Dict, line);
      while (!acceptOp("}")) {
        dict->children.push_back(parseExpression());
        expectOp(":");
        dict->children.push_back(parseExpression());
        if (!isOp("}")) expectOp(",");
      }
      return dict;
    }
    syntaxError(line, fmt::format("unexpected '{}'", tok.text));
  }

  ExprPtr parsePostfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (acceptOp(".")) {
        auto a = make(Expr::Kind::Attr, line);
        if (peek().type == Tok::Int) {  // x.0 is x[0]
          a->kind = Expr::Kind::Item;
          auto index = make(Expr::Kind::Literal, line);
          index->value = static_cast<std::int64_t>(std::stoll(next().text));
          a->children.push_back(std::move(e));
          a->children.push_back(std::move(index));
        } else {
          a->name = expectName();
          a->children.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (acceptOp("[")) {
        e = parseSubscript(std::move(e), line);
      } else if (acceptOp("(")) {
        e = parseCall(std::move(e), line);
      } else {
        return e;
      }
    }
  }

  // callee(arguments), the '(' already taken.
  ExprPtr parseCall(ExprPtr callee, int line) {
    auto call = make(Expr::Kind::Call, line);
    call->children.push_back(std::move(callee));
    parseArguments(*call);
    return call;
  }

  ExprPtr parseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int colons = 0;
    while (!acceptOp("]")) {
      if (acceptOp(":")) {
        if (++colons > 2) syntaxError(line, "a slice has at most three parts");
        continue;
      }
      if (parts[colons]) syntaxError(line, "expected ':' or ']'");
      parts[colons] = parseExpression();
    }
    auto e = make(colons ? Expr::Kind::Slice : Expr::Kind::Item, line);
    e->children.push_back(std::move(target));
    if (!colons && !parts[0]) syntaxError(line, "empty subscript");
    for (int k = 0; k < (colons ? 3 : 1); ++k) e->children.push_back(std::move(parts[k]));
    return e;
  }

  ExprPtr parseFilters(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (acceptOp("|")) {
        auto f = make(Expr::Kind::Filter, line);
        f->name = expectName();
        if (!isKnownFilter(f->name)) syntaxError(line, fmt::format("filter '{}' is not supported", f->name));
        f->children.push_back(std::move(e));
        if (acceptOp("(")) parseArguments(*f);
        e = std::move(f);
      } else if (acceptName("is")) {
        auto t = make(Expr::Kind::Test, line);
        t->negated = acceptName("not");
        t->name = expectName();
        if (!isKnownTest(t->name)) syntaxError(line, fmt::format("test '{}' is not supported", t->name));
        t->children.push_back(std::move(e));
        if (acceptOp("(")) {
          parseArguments(*t);
        } else if ((peek().type == Tok::Name || peek().type == Tok::String || peek().type == Tok::Int ||
                    peek().type == Tok::Float || isOp("[") || isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
          t->children.push_back(parsePostfix(parsePrimary()));  // x is divisibleby 3
        }
        e = std::move(t);
      } else if (acceptOp("(")) {
        e = parseCall(std::move(e), line);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
};

}  // namespace

Template parseTemplate(const std::string& source) { return Parser(lexTemplate(source)).run(); }

}  // namespace astraflow::jinja
