// The chat-template interpreter's filters, tests, attribute and item lookups, slices and str/dict methods, with
// Jinja2's and Python's semantics; isKnownFilter / isKnownTest let the parser refuse the rest by name.
#include "text/jinja_builtins.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "astraflow/core/error.hpp"
#include "text/unicode.hpp"

namespace astraflow::jinja {
namespace detail {

const std::set<std::string>& filterNames() {
  static const std::set<std::string> names = {
      "abs",        "capitalize", "count",  "d",          "default", "e",       "escape", "first",  "float",
      "indent",     "int",        "items",  "join",       "last",    "length",  "list",   "lower",  "map",
      "max",        "min",        "reject", "rejectattr", "replace", "reverse", "round",  "safe",   "select",
      "selectattr", "sort",       "string", "sum",        "title",   "tojson",  "trim",   "unique", "upper"};
  return names;
}

const std::set<std::string>& testNames() {
  static const std::set<std::string> names = {
      "boolean", "callable", "defined", "divisibleby", "eq",       "equalto",  "even",   "false", "float",
      "ge",      "gt",       "in",      "integer",     "iterable", "le",       "lower",  "lt",    "mapping",
      "ne",      "none",     "number",  "odd",         "sameas",   "sequence", "string", "true",  "undefined",
      "upper",   "==",       "!=",      "<",           "<=",       ">",        ">="};
  return names;
}

std::vector<char32_t> codePoints(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t pos = 0; pos < s.size();) out.push_back(unicode::nextCodePoint(s, pos));
  return out;
}

std::string fromCodePoints(const std::vector<char32_t>& cps, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t k = from; k < to; ++k) unicode::appendUtf8(out, cps[k]);
  return out;
}

// Python's str.isspace() for the strip/split family.
bool pySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
         (c > 0x7F && unicode::classOf(c) == unicode::CharClass::Space);
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto cps = codePoints(s);
  std::vector<char32_t> set;
  if (chars.isString()) set = codePoints(chars.asString());
  const auto strippable = [&](char32_t c) {
    return chars.isString() ? std::find(set.begin(), set.end(), c) != set.end() : pySpace(c);
  };
  std::size_t from = 0, to = cps.size();
  while (left && from < to && strippable(cps[from])) ++from;
  while (right && to > from && strippable(cps[to - 1])) --to;
  return fromCodePoints(cps, from, to);
}

Array split(const std::string& s, const Value& sep, std::int64_t max_split) {
  Array out;
  if (!sep.isString()) {  // runs of whitespace, no empty parts
    const auto cps = codePoints(s);
    std::size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && pySpace(cps[k])) ++k;
      if (k == cps.size()) break;
      std::size_t e = k;
      if (max_split >= 0 && static_cast<std::int64_t>(out.size()) == max_split) {
        std::size_t end = cps.size();
        while (end > k && pySpace(cps[end - 1])) --end;
        out.emplace_back(fromCodePoints(cps, k, end));
        break;
      }
      while (e < cps.size() && !pySpace(cps[e])) ++e;
      out.emplace_back(fromCodePoints(cps, k, e));
      k = e;
    }
    return out;
  }
  const std::string& d = sep.asString();
  if (d.empty()) renderError("split: empty separator");
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(d, start);
    if (at == std::string::npos || (max_split >= 0 && static_cast<std::int64_t>(out.size()) == max_split)) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string mapAscii(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (alpha) c = static_cast<char>(start ? std::toupper(c) : std::tolower(c));
    start = !alpha;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) renderError("replace: empty search string");
  std::string out;
  std::size_t start = 0;
  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    const std::size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
  }
  return out + s.substr(start);
}

Value arg(const Arguments& a, std::size_t i, const char* name, Value fallback) {
  for (const auto& [k, v] : a.named)
    if (k == name) return v;
  return i < a.positional.size() ? a.positional[i] : fallback;
}

std::string requireString(const Value& v, const char* what) {
  if (!v.isString()) renderError(fmt::format("{} needs a string, not a {}", what, v.typeName()));
  return v.asString();
}

bool compareLess(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) return a.asNumber() < b.asNumber();
  if (a.isString() && b.isString()) return a.asString() < b.asString();
  renderError(fmt::format("cannot order a {} and a {}", a.typeName(), b.typeName()));
}

Array selectBy(const Value& input, const Arguments& args, bool keep, bool by_attribute) {
  std::size_t first = 0;
  std::string attribute;
  if (by_attribute) attribute = requireString(arg(args, first++, "attribute"), "selectattr");
  Array out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? getAttribute(item, attribute) : item;
    bool pass;
    if (args.positional.size() <= first) {
      pass = subject.truthy();
    } else {
      Arguments test_args;
      test_args.positional.assign(args.positional.begin() + static_cast<long>(first) + 1, args.positional.end());
      pass = applyTest(requireString(args.positional[first], "select"), subject, test_args);
    }
    if (pass == keep) out.push_back(item);
  }
  return out;
}

Value stringMethod(const std::string& s, const std::string& name, const Arguments& a) {
  if (name == "startswith" || name == "endswith") {
    const Value p = arg(a, 0, "prefix");
    Array options = p.isArray() ? p.asArray() : Array{p};
    for (const Value& o : options) {
      const std::string x = requireString(o, name.c_str());
      const bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                            : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      if (hit) return true;
    }
    return false;
  }
  if (name == "strip") return strip(s, arg(a, 0, "chars"), true, true);
  if (name == "lstrip") return strip(s, arg(a, 0, "chars"), true, false);
  if (name == "rstrip") return strip(s, arg(a, 0, "chars"), false, true);
  if (name == "split") {
    const Value n = arg(a, 1, "maxsplit", -1);
    return split(s, arg(a, 0, "sep"), n.isInt() ? n.asInt() : -1);
  }
  if (name == "upper") return mapAscii(s, ::toupper);
  if (name == "lower") return mapAscii(s, ::tolower);
  if (name == "title") return title(s);
  if (name == "capitalize")
    return s.empty() ? s : mapAscii(s.substr(0, 1), ::toupper) + mapAscii(s.substr(1), ::tolower);
  if (name == "replace") {
    const Value n = arg(a, 2, "count", -1);
    return replace(s, requireString(arg(a, 0, "old"), "replace"), requireString(arg(a, 1, "new"), "replace"),
                   n.isInt() ? n.asInt() : -1);
  }
  if (name == "find") {
    const std::size_t at = s.find(requireString(arg(a, 0, "sub"), "find"));
    return at == std::string::npos ? std::int64_t{-1} : static_cast<std::int64_t>(codePoints(s.substr(0, at)).size());
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : iterate(arg(a, 0, "iterable"))) {
      out += (first ? "" : s) + requireString(v, "join");
      first = false;
    }
    return out;
  }
  renderError(fmt::format("string method '{}' is not supported", name));
}

Value dictMethod(const Value& d, const std::string& name, const Arguments& a) {
  if (name == "get") {
    const Value* v = d.find(requireString(arg(a, 0, "key"), "get"));
    return v ? *v : arg(a, 1, "default", nullptr);
  }
  Array out;
  for (const auto& [k, v] : d.asObject()) {
    if (name == "items")
      out.push_back(Array{k, v});
    else if (name == "keys")
      out.emplace_back(k);
    else
      out.push_back(v);
  }
  return out;
}

std::string escapeHtml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string pad =
      width.isString() ? width.asString() : std::string(static_cast<std::size_t>(width.asInt()), ' ');
  std::string out;
  std::size_t start = 0;
  bool first_line = true;
  while (true) {
    const std::size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const bool pad_it = first_line ? first : (blank || !line.empty());
    out += (pad_it ? pad : "") + line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    first_line = false;
  }
  return out;
}

}  // namespace detail

using namespace detail;

[[noreturn]] void renderError(const std::string& what) { throw Error("chat template: " + what); }

bool isKnownFilter(const std::string& name) { return filterNames().count(name) > 0; }
bool isKnownTest(const std::string& name) { return testNames().count(name) > 0; }

std::int64_t length(const Value& v) {
  if (v.isUndefined()) return 0;
  if (v.isString()) return static_cast<std::int64_t>(codePoints(v.asString()).size());
  if (v.isArray()) return static_cast<std::int64_t>(v.asArray().size());
  if (v.isObject()) return static_cast<std::int64_t>(v.asObject().size());
  renderError(fmt::format("a {} has no length", v.typeName()));
}

Array iterate(const Value& v) {
  if (v.isUndefined() || v.isNone()) return {};
  if (v.isArray()) return v.asArray();
  Array out;
  if (v.isObject()) {
    for (const auto& [k, x] : v.asObject()) out.emplace_back(k);
  } else if (v.isString()) {
    for (char32_t c : codePoints(v.asString())) out.emplace_back(fromCodePoints({c}, 0, 1));
  } else {
    renderError(fmt::format("a {} cannot be iterated", v.typeName()));
  }
  return out;
}

Value getAttribute(const Value& object, const std::string& name) {
  static const std::set<std::string> kStringMethods = {"startswith", "endswith", "strip", "lstrip", "rstrip",
                                                       "split",      "upper",    "lower", "title",  "capitalize",
                                                       "replace",    "find",     "join"};
  if (object.isUndefined())
    renderError(fmt::format("'{}' is undefined, so it has no attribute '{}'", object.undefinedName(), name));
  if (object.isString() && kStringMethods.count(name)) {
    const std::string s = object.asString();
    return Function([s, name](const Arguments& a) { return stringMethod(s, name, a); });
  }
  if (object.isObject() && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Function([object, name](const Arguments& a) { return dictMethod(object, name, a); });
  }
  if (const Value* v = object.find(name)) return *v;
  return Value::undefined(name);
}

Value getItem(const Value& object, const Value& key) {
  if (object.isUndefined())
    renderError(fmt::format("'{}' is undefined, so it has no item {}", object.undefinedName(), key.repr()));
  if ((object.isArray() || object.isString()) && key.isInt()) {
    const Array items = object.isArray() ? object.asArray() : iterate(object);
    std::int64_t i = key.asInt();
    if (i < 0) i += static_cast<std::int64_t>(items.size());
    if (i < 0 || i >= static_cast<std::int64_t>(items.size()))
      return Value::undefined(fmt::format("[{}]", key.asInt()));
    return items[static_cast<std::size_t>(i)];
  }
  if (key.isString()) {
    if (const Value* v = object.find(key.asString())) return *v;
    return getAttribute(object, key.asString());
  }
  return Value::undefined(key.repr());
}

Value getSlice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  const Array items = iterate(object);
  const auto n = static_cast<std::int64_t>(items.size());
  const std::int64_t s = step.isInt() ? step.asInt() : 1;
  if (s == 0) renderError("slice step cannot be zero");
  auto clamp = [&](const Value& v, std::int64_t fallback) {
    if (!v.isInt()) return fallback;
    std::int64_t i = v.asInt();
    if (i < 0) i += n;
    return s > 0 ? std::clamp<std::int64_t>(i, 0, n) : std::clamp<std::int64_t>(i, -1, n - 1);
  };
  const std::int64_t from = clamp(start, s > 0 ? 0 : n - 1);
  const std::int64_t to = clamp(stop, s > 0 ? n : -1);
  Array out;
  for (std::int64_t i = from; s > 0 ? i < to : i > to; i += s) out.push_back(items[static_cast<std::size_t>(i)]);
  if (!object.isString()) return out;
  std::string text;
  for (const Value& c : out) text += c.asString();
  return text;
}

bool applyTest(const std::string& name, const Value& v, const Arguments& a) {
  const Value other = arg(a, 0, "value");
  if (name == "defined") return !v.isUndefined();
  if (name == "undefined") return v.isUndefined();
  if (name == "none") return v.isNone();
  if (name == "string") return v.isString();
  if (name == "number") return v.isNumber() || v.isBool();
  if (name == "integer") return v.isInt();
  if (name == "float") return v.isFloat();
  if (name == "boolean") return v.isBool();
  if (name == "true") return v.isBool() && v.asBool();
  if (name == "false") return v.isBool() && !v.asBool();
  if (name == "mapping") return v.isObject();
  if (name == "iterable") return v.isArray() || v.isObject() || v.isString() || v.isUndefined();
  if (name == "sequence") return v.isArray() || v.isObject() || v.isString();
  if (name == "callable") return v.isCallable();
  if (name == "lower") return v.isString() && mapAscii(v.asString(), ::tolower) == v.asString();
  if (name == "upper") return v.isString() && mapAscii(v.asString(), ::toupper) == v.asString();
  if (name == "odd" || name == "even") {
    if (!v.isInt()) renderError(fmt::format("test '{}' needs an integer", name));
    return (v.asInt() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") return v.isInt() && other.isInt() && other.asInt() != 0 && v.asInt() % other.asInt() == 0;
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v == other;
  if (name == "ne" || name == "!=") return !(v == other);
  if (name == "lt" || name == "<") return compareLess(v, other);
  if (name == "gt" || name == ">") return compareLess(other, v);
  if (name == "le" || name == "<=") return !compareLess(other, v);
  if (name == "ge" || name == ">=") return !compareLess(v, other);
  if (name == "in") {
    if (other.isString()) return v.isString() && other.asString().find(v.asString()) != std::string::npos;
    if (other.isObject()) return v.isString() && other.find(v.asString()) != nullptr;
    for (const Value& x : iterate(other))
      if (x == v) return true;
    return false;
  }
  renderError(fmt::format("test '{}' is not supported", name));
}

}  // namespace astraflow::jinja
