// The filters chat templates use, with Jinja2's semantics; tojson is transformers' own
// (json.dumps with ensure_ascii=False).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "text/jinja_builtins.hpp"

namespace astraflow::jinja {

using namespace detail;

namespace {

// A filter: the value it is applied to, its arguments, and the name it was called by (a few
// share one body).
using Filter = Value (*)(const std::string& name, const Value& in, const Arguments& a);

Value defaultFilter(const std::string&, const Value& in, const Arguments& a) {
  const bool boolean = arg(a, 1, "boolean", false).truthy();
  return in.isUndefined() || (boolean && !in.truthy()) ? arg(a, 0, "default_value", "") : in;
}

Value toJsonFilter(const std::string&, const Value& in, const Arguments& a) {
  for (const auto& [k, v] : a.named)
    if (k == "sort_keys" && v.truthy()) renderError("tojson: sort_keys is not supported");
  const Value width = arg(a, 0, "indent", nullptr);
  return toJson(in, width.isInt() ? static_cast<int>(width.asInt()) : -1);
}

Value capitalizeFilter(const std::string&, const Value& in, const Arguments&) {
  const std::string s = in.str();
  return s.empty() ? s : mapAscii(s.substr(0, 1), ::toupper) + mapAscii(s.substr(1), ::tolower);
}

Value replaceFilter(const std::string&, const Value& in, const Arguments& a) {
  const Value n = arg(a, 2, "count", nullptr);
  return replace(in.str(), requireString(arg(a, 0, "old"), "replace"), requireString(arg(a, 1, "new"), "replace"),
                 n.isInt() ? n.asInt() : -1);
}

Value indentFilter(const std::string&, const Value& in, const Arguments& a) {
  return indent(in.str(), arg(a, 0, "width", 4), arg(a, 1, "first", false).truthy(),
                arg(a, 2, "blank", false).truthy());
}

Value joinFilter(const std::string&, const Value& in, const Arguments& a) {
  const Value attribute = arg(a, 1, "attribute", nullptr);
  const std::string sep = arg(a, 0, "d", "").str();
  std::string out;
  bool first = true;
  for (const Value& v : iterate(in)) {
    out += (first ? "" : sep) + (attribute.isString() ? getAttribute(v, attribute.asString()) : v).str();
    first = false;
  }
  return out;
}

Value itemsFilter(const std::string&, const Value& in, const Arguments&) {
  if (in.isUndefined()) return Array{};
  if (!in.isObject()) renderError(fmt::format("items needs a dict, not a {}", in.typeName()));
  Array out;
  for (const auto& [k, v] : in.asObject()) out.push_back(Array{k, v});
  return out;
}

Value firstOrLastFilter(const std::string& name, const Value& in, const Arguments&) {
  const Array items = iterate(in);
  if (items.empty()) return Value::undefined(name);
  return name == "first" ? items.front() : items.back();
}

Value reverseFilter(const std::string&, const Value& in, const Arguments&) {
  Array items = iterate(in);
  std::reverse(items.begin(), items.end());
  if (!in.isString()) return items;
  std::string out;
  for (const Value& c : items) out += c.asString();
  return out;
}

Value uniqueFilter(const std::string&, const Value& in, const Arguments&) {
  Array out;
  for (const Value& v : iterate(in))
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

Value sortFilter(const std::string&, const Value& in, const Arguments& a) {
  Array items = iterate(in);
  const Value attribute = arg(a, 2, "attribute", nullptr);
  const auto key = [&](const Value& v) { return attribute.isString() ? getAttribute(v, attribute.asString()) : v; };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return compareLess(key(x), key(y)); });
  if (arg(a, 0, "reverse", false).truthy()) std::reverse(items.begin(), items.end());
  return items;
}

Value mapFilter(const std::string&, const Value& in, const Arguments& a) {
  Array out;
  const Value attribute = arg(a, 99, "attribute", nullptr);
  for (const Value& v : iterate(in)) {
    if (attribute.isString()) {
      const Value x = getAttribute(v, attribute.asString());
      out.push_back(x.isUndefined() ? arg(a, 99, "default", x) : x);
    } else {
      if (a.positional.empty()) renderError("map needs a filter name or attribute=");
      Arguments rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      out.push_back(applyFilter(requireString(a.positional[0], "map"), v, rest));
    }
  }
  return out;
}

Value intFilter(const std::string&, const Value& in, const Arguments& a) {
  if (in.isInt()) return in;
  if (in.isFloat()) return static_cast<std::int64_t>(in.asNumber());
  if (in.isBool()) return static_cast<std::int64_t>(in.asBool());
  try {
    return static_cast<std::int64_t>(std::stoll(in.str()));
  } catch (const std::exception&) {
    return arg(a, 0, "default", 0);
  }
}

Value floatFilter(const std::string&, const Value& in, const Arguments& a) {
  if (in.isNumber() || in.isBool()) return in.asNumber();
  try {
    return std::stod(in.str());
  } catch (const std::exception&) {
    return arg(a, 0, "default", 0.0);
  }
}

Value absFilter(const std::string&, const Value& in, const Arguments&) {
  if (in.isInt()) return in.asInt() < 0 ? -in.asInt() : in.asInt();
  return std::fabs(in.asNumber());
}

Value roundFilter(const std::string&, const Value& in, const Arguments& a) {
  const Value precision = arg(a, 0, "precision", 0);
  const double scale = std::pow(10.0, static_cast<double>(precision.isInt() ? precision.asInt() : 0));
  return std::round(in.asNumber() * scale) / scale;
}

Value sumFilter(const std::string&, const Value& in, const Arguments& a) {
  Value total = arg(a, 1, "start", 0);
  for (const Value& v : iterate(in)) {
    total = total.isInt() && v.isInt() ? Value(total.asInt() + v.asInt()) : Value(total.asNumber() + v.asNumber());
  }
  return total;
}

Value minOrMaxFilter(const std::string& name, const Value& in, const Arguments&) {
  const Array items = iterate(in);
  if (items.empty()) return Value::undefined(name);
  Value best = items.front();
  for (const Value& v : items)
    if (name == "min" ? compareLess(v, best) : compareLess(best, v)) best = v;
  return best;
}

// Every filter by the names templates call it by. Jinja's string filters take str() of what
// they are given (a dict's repr, a number's digits).
const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table{
      {"default", defaultFilter},
      {"d", defaultFilter},
      {"length", [](const std::string&, const Value& in, const Arguments&) -> Value { return length(in); }},
      {"count", [](const std::string&, const Value& in, const Arguments&) -> Value { return length(in); }},
      {"string", [](const std::string&, const Value& in, const Arguments&) -> Value { return in.str(); }},
      {"safe", [](const std::string&, const Value& in, const Arguments&) -> Value { return in; }},
      {"e", [](const std::string&, const Value& in, const Arguments&) -> Value { return escapeHtml(in.str()); }},
      {"escape", [](const std::string&, const Value& in, const Arguments&) -> Value { return escapeHtml(in.str()); }},
      {"tojson", toJsonFilter},
      {"trim",
       [](const std::string&, const Value& in, const Arguments& a) -> Value {
         return Value(strip(in.str(), arg(a, 0, "chars"), true, true));
       }},
      {"upper",
       [](const std::string&, const Value& in, const Arguments&) -> Value {
         return Value(mapAscii(in.str(), ::toupper));
       }},
      {"lower",
       [](const std::string&, const Value& in, const Arguments&) -> Value {
         return Value(mapAscii(in.str(), ::tolower));
       }},
      {"title", [](const std::string&, const Value& in, const Arguments&) -> Value { return Value(title(in.str())); }},
      {"capitalize", capitalizeFilter},
      {"replace", replaceFilter},
      {"indent", indentFilter},
      {"join", joinFilter},
      {"items", itemsFilter},
      {"list", [](const std::string&, const Value& in, const Arguments&) -> Value { return Value(iterate(in)); }},
      {"first", firstOrLastFilter},
      {"last", firstOrLastFilter},
      {"reverse", reverseFilter},
      {"unique", uniqueFilter},
      {"sort", sortFilter},
      {"select",
       [](const std::string&, const Value& in, const Arguments& a) -> Value { return selectBy(in, a, true, false); }},
      {"reject",
       [](const std::string&, const Value& in, const Arguments& a) -> Value { return selectBy(in, a, false, false); }},
      {"selectattr",
       [](const std::string&, const Value& in, const Arguments& a) -> Value { return selectBy(in, a, true, true); }},
      {"rejectattr",
       [](const std::string&, const Value& in, const Arguments& a) -> Value { return selectBy(in, a, false, true); }},
      {"map", mapFilter},
      {"int", intFilter},
      {"float", floatFilter},
      {"abs", absFilter},
      {"round", roundFilter},
      {"sum", sumFilter},
      {"min", minOrMaxFilter},
      {"max", minOrMaxFilter},
  };
  return table;
}

}  // namespace

Value applyFilter(const std::string& name, const Value& in, const Arguments& a) {
  const auto it = filters().find(name);
  if (it == filters().end()) renderError(fmt::format("filter '{}' is not supported", name));
  return it->second(name, in, a);
}

}  // namespace astraflow::jinja
