// Rendering of a parsed chat template with Jinja2's semantics: a fresh scope per loop
// iteration and per macro call (so `set` inside a loop does not leak out; namespace() objects
// carry values out), Undefined for missing names and entries, Python's operators.
#include <fmt/format.h>

#include <cmath>
#include <ctime>

#include "astraflow/core/error.hpp"
#include "text/jinja_ast.hpp"
#include "text/jinja_builtins.hpp"

namespace astraflow::jinja {
namespace {

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  explicit Renderer(const Object& variables) {
    frames_.emplace_back(builtins());
    frames_.emplace_back(variables);
  }

  std::string run(const Body& body) {
    exec(body);
    return std::move(out_);
  }

 private:
  static Object builtins() {
    Object g;
    g.emplace_back("raise_exception", Function([](const Arguments& a) -> Value {
                     renderError("the template raised: " + (a.positional.empty() ? "" : a.positional[0].str()));
                   }));
    g.emplace_back("strftime_now", Function([](const Arguments& a) -> Value {
                     const std::time_t now = std::time(nullptr);
                     std::tm tm{};
                     localtime_r(&now, &tm);
                     char buf[256];
                     const std::string format = a.positional.empty() ? "" : a.positional[0].str();
                     return std::string(buf, std::strftime(buf, sizeof buf, format.c_str(), &tm));
                   }));
    g.emplace_back("namespace", Function([](const Arguments& a) -> Value {
                     auto ns = std::make_shared<Namespace>();
                     for (const Value& p : a.positional)
                       if (p.isObject()) ns->attributes = p.asObject();
                     for (const auto& [k, v] : a.named) ns->attributes.emplace_back(k, v);
                     return ns;
                   }));
    g.emplace_back("dict", Function([](const Arguments& a) -> Value {
                     Object o;
                     for (const auto& [k, v] : a.named) o.emplace_back(k, v);
                     return o;
                   }));
    g.emplace_back("range", Function([](const Arguments& a) -> Value {
                     std::int64_t start = 0, stop = 0, step = 1;
                     for (const Value& v : a.positional)
                       if (!v.isInt()) renderError("range needs integers");
                     if (a.positional.size() == 1) stop = a.positional[0].asInt();
                     if (a.positional.size() >= 2) start = a.positional[0].asInt(), stop = a.positional[1].asInt();
                     if (a.positional.size() == 3) step = a.positional[2].asInt();
                     if (step == 0) renderError("range step cannot be zero");
                     Array out;
                     for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
                     return out;
                   }));
    return g;
  }

  Value lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f)
      for (auto v = f->rbegin(); v != f->rend(); ++v)
        if (v->first == name) return v->second;
    return Value::undefined(name);
  }

  void assign(const std::string& name, Value value) {
    for (auto& [k, v] : frames_.back()) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    frames_.back().emplace_back(name, std::move(value));
  }

  void assignTargets(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      assign(targets[0], value);
      return;
    }
    const Array items = iterate(value);
    if (items.size() != targets.size())
      throw Error(fmt::format("chat template line {}: cannot unpack {} values into {} names", line, items.size(),
                              targets.size()));
    for (std::size_t k = 0; k < targets.size(); ++k) assign(targets[k], items[k]);
  }

  Flow exec(const Body& body) {
    for (const NodePtr& n : body) {
      const Flow f = execNode(*n);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow execNode(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Text: out_ += n.text; break;
      case Node::Kind::Output: out_ += eval(*n.expr).str(); break;
      case Node::Kind::If:
        for (const auto& [condition, body] : n.branches)
          if (!condition || eval(*condition).truthy()) return exec(body);
        break;
      case Node::Kind::For: return execFor(n);
      case Node::Kind::Set: {
        Value value = eval(*n.expr);
        if (n.text.empty()) {
          assignTargets(n.targets, value, n.line);
        } else {
          const Value target = lookup(n.targets[0]);
          if (!target.isNamespace())
            throw Error(fmt::format("chat template line {}: '{}' is not a namespace()", n.line, n.targets[0]));
          Object& attributes = target.asNamespace().attributes;
          auto it =
              std::find_if(attributes.begin(), attributes.end(), [&](const auto& kv) { return kv.first == n.text; });
          if (it == attributes.end())
            attributes.emplace_back(n.text, std::move(value));
          else
            it->second = std::move(value);
        }
        break;
      }
      case Node::Kind::SetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        exec(n.body);
        assign(n.targets[0], std::move(out_));
        out_ = std::move(saved);
        break;
      }
      case Node::Kind::Macro: assign(n.text, macro(n)); break;
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
      case Node::Kind::Block: return exec(n.body);
    }
    return Flow::Normal;
  }

  Flow execFor(const Node& n) {
    Array items;
    for (const Value& item : iterate(eval(*n.expr))) {
      if (n.condition) {
        frames_.emplace_back();
        assignTargets(n.targets, item, n.line);
        const bool keep = eval(*n.condition).truthy();
        frames_.pop_back();
        if (!keep) continue;
      }
      items.push_back(item);
    }
    if (items.empty()) return exec(n.else_body);
    const auto count = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < count; ++i) {
      Object loop = {
          {"index0", i},
          {"index", i + 1},
          {"revindex0", count - i - 1},
          {"revindex", count - i},
          {"first", i == 0},
          {"last", i == count - 1},
          {"length", count},
          {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("previtem")},
          {"nextitem", i + 1 < count ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("nextitem")}};
      frames_.emplace_back();
      assign("loop", Value(std::move(loop)));
      assignTargets(n.targets, items[static_cast<std::size_t>(i)], n.line);
      const Flow f = exec(n.body);
      frames_.pop_back();
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  Value macro(const Node& n) {
    return Function([this, &n](const Arguments& a) -> Value {
      frames_.emplace_back();
      for (std::size_t k = 0; k < n.targets.size(); ++k) {
        Value v = k < a.positional.size() ? a.positional[k] : Value::undefined(n.targets[k]);
        for (const auto& [key, x] : a.named)
          if (key == n.targets[k]) v = x;
        if (v.isUndefined() && n.defaults[k]) v = eval(*n.defaults[k]);
        assign(n.targets[k], v);
      }
      std::string saved = std::move(out_);
      out_.clear();
      exec(n.body);
      std::string result = std::move(out_);
      out_ = std::move(saved);
      frames_.pop_back();
      return result;
    });
  }

  Arguments arguments(const Expr& e, std::size_t first) {
    Arguments a;
    for (std::size_t k = first; k < e.children.size(); ++k) a.positional.push_back(eval(*e.children[k]));
    for (const auto& [key, x] : e.kwargs) a.named.emplace_back(key, eval(*x));
    return a;
  }

  Value eval(const Expr& e) {
    try {
      return evalUnchecked(e);
    } catch (const Error& err) {
      // The innermost expression names its line; errors that have one pass through unchanged.
      static const std::string kPrefix = "chat template: ";
      const std::string what = err.what();
      if (what.rfind(kPrefix, 0) == 0)
        throw Error(fmt::format("chat template line {}: {}", e.line, what.substr(kPrefix.size())));
      throw;
    }
  }

  Value evalUnchecked(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: return arguments(e, 0).positional;
      case Expr::Kind::Dict: {
        Object o;
        for (std::size_t k = 0; k + 1 < e.children.size(); k += 2)
          o.emplace_back(eval(*e.children[k]).str(), eval(*e.children[k + 1]));
        return o;
      }
      case Expr::Kind::Attr: return getAttribute(eval(*e.children[0]), e.name);
      case Expr::Kind::Item: return getItem(eval(*e.children[0]), eval(*e.children[1]));
      case Expr::Kind::Slice: {
        auto part = [&](std::size_t k) { return e.children[k] ? eval(*e.children[k]) : Value(nullptr); };
        return getSlice(eval(*e.children[0]), part(1), part(2), part(3));
      }
      case Expr::Kind::Call: {
        const Value callee = eval(*e.children[0]);
        if (!callee.isCallable()) renderError(fmt::format("a {} cannot be called", callee.typeName()));
        return callee.asCallable()(arguments(e, 1));
      }
      case Expr::Kind::Filter: return applyFilter(e.name, eval(*e.children[0]), arguments(e, 1));
      case Expr::Kind::Test: return applyTest(e.name, eval(*e.children[0]), arguments(e, 1)) != e.negated;
      case Expr::Kind::Unary: {
        const Value v = eval(*e.children[0]);
        if (e.name == "not") return !v.truthy();
        if (v.isInt()) return e.name == "-" ? -v.asInt() : v.asInt();
        if (!v.isNumber()) renderError(fmt::format("unary {} of a {}", e.name, v.typeName()));
        return e.name == "-" ? -v.asNumber() : v.asNumber();
      }
      case Expr::Kind::Binary: return binary(e);
      case Expr::Kind::Condition:
        if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
        return e.children.size() > 2 ? eval(*e.children[2]) : Value::undefined("else");
    }
    return Value();
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? eval(*e.children[1]) : left;
    }
    if (op == "or") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? left : eval(*e.children[1]);
    }
    const Value a = eval(*e.children[0]);
    const Value b = eval(*e.children[1]);
    if (op == "~") return a.str() + b.str();
    if (op == "==") return a == b;
    if (op == "!=") return !(a == b);
    if (op == "in" || op == "notin") return applyTest("in", a, Arguments{{b}, {}}) == (op == "in");
    if (op == "<") return detail::compareLess(a, b);
    if (op == ">") return detail::compareLess(b, a);
    if (op == "<=") return !detail::compareLess(b, a);
    if (op == ">=") return !detail::compareLess(a, b);
    if (a.isUndefined() || b.isUndefined())
      renderError(fmt::format("'{}' is undefined", a.isUndefined() ? a.undefinedName() : b.undefinedName()));
    if (op == "+") {
      if (a.isString() && b.isString()) return a.asString() + b.asString();
      if (a.isArray() && b.isArray()) {
        Array out = a.asArray();
        out.insert(out.end(), b.asArray().begin(), b.asArray().end());
        return out;
      }
    }
    if (op == "*" && (a.isString() || b.isString()) && (a.isInt() || b.isInt())) {
      const std::string& s = a.isString() ? a.asString() : b.asString();
      std::string out;
      for (std::int64_t k = 0; k < (a.isInt() ? a.asInt() : b.asInt()); ++k) out += s;
      return out;
    }
    if (!(a.isNumber() || a.isBool()) || !(b.isNumber() || b.isBool()))
      renderError(fmt::format("unsupported operand types for {}: {} and {}", op, a.typeName(), b.typeName()));
    const bool ints = !a.isFloat() && !b.isFloat();
    const double x = a.asNumber(), y = b.asNumber();
    if ((op == "/" || op == "//" || op == "%") && y == 0) renderError("division by zero");
    if (op == "/") return x / y;
    if (ints) {
      const auto i = static_cast<std::int64_t>(x), j = static_cast<std::int64_t>(y);
      if (op == "+") return i + j;
      if (op == "-") return i - j;
      if (op == "*") return i * j;
      if (op == "//") return static_cast<std::int64_t>(std::floor(x / y));
      if (op == "%") return ((i % j) + j) % j;
      if (op == "**" && j >= 0) return static_cast<std::int64_t>(std::llround(std::pow(x, y)));
    }
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "//") return std::floor(x / y);
    if (op == "%") return x - y * std::floor(x / y);
    return std::pow(x, y);
  }

  std::vector<Object> frames_;
  std::string out_;
};

}  // namespace

std::string renderTemplate(const Template& tpl, const Object& variables) { return Renderer(variables).run(tpl.body); }

}  // namespace astraflow::jinja
