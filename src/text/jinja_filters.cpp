// The filters chat templates use, with Jinja2's semantics; tojson is transformers' own
// (json.dumps with ensure_ascii=False).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "text/jinja_builtins.hpp"

namespace astraflow::jinja {

using namespace detail;

Value applyFilter(const std::string& name, const Value& in, const Arguments& a) {
  if (name == "default" || name == "d") {
    const bool boolean = arg(a, 1, "boolean", false).truthy();
    return in.isUndefined() || (boolean && !in.truthy()) ? arg(a, 0, "default_value", "") : in;
  }
  if (name == "length" || name == "count") return length(in);
  if (name == "string") return in.str();
  if (name == "safe") return in;
  if (name == "e" || name == "escape") return escapeHtml(in.str());
  if (name == "tojson") {
    for (const auto& [k, v] : a.named)
      if (k == "sort_keys" && v.truthy()) renderError("tojson: sort_keys is not supported");
    const Value width = arg(a, 0, "indent", nullptr);
    return toJson(in, width.isInt() ? static_cast<int>(width.asInt()) : -1);
  }
  // Jinja's string filters take str() of what they are given (a dict's repr, a number's digits).
  if (name == "trim") return strip(in.str(), arg(a, 0, "chars"), true, true);
  if (name == "upper") return mapAscii(in.str(), ::toupper);
  if (name == "lower") return mapAscii(in.str(), ::tolower);
  if (name == "title") return title(in.str());
  if (name == "capitalize") {
    const std::string s = in.str();
    return s.empty() ? s : mapAscii(s.substr(0, 1), ::toupper) + mapAscii(s.substr(1), ::tolower);
  }
  if (name == "replace") {
    const Value n = arg(a, 2, "count", nullptr);
    return replace(in.str(), requireString(arg(a, 0, "old"), "replace"), requireString(arg(a, 1, "new"), "replace"),
                   n.isInt() ? n.asInt() : -1);
  }
  if (name == "indent") {
    return indent(in.str(), arg(a, 0, "width", 4), arg(a, 1, "first", false).truthy(),
                  arg(a, 2, "blank", false).truthy());
  }
  if (name == "join") {
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
  if (name == "items") {
    if (in.isUndefined()) return Array{};
    if (!in.isObject()) renderError(fmt::format("items needs a dict, not a {}", in.typeName()));
    Array out;
    for (const auto& [k, v] : in.asObject()) out.push_back(Array{k, v});
    return out;
  }
  if (name == "list") return iterate(in);
  if (name == "first" || name == "last") {
    const Array items = iterate(in);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    Array items = iterate(in);
    std::reverse(items.begin(), items.end());
    if (!in.isString()) return items;
    std::string out;
    for (const Value& c : items) out += c.asString();
    return out;
  }
  if (name == "unique") {
    Array out;
    for (const Value& v : iterate(in))
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    return out;
  }
  if (name == "sort") {
    Array items = iterate(in);
    const Value attribute = arg(a, 2, "attribute", nullptr);
    const auto key = [&](const Value& v) { return attribute.isString() ? getAttribute(v, attribute.asString()) : v; };
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& x, const Value& y) { return compareLess(key(x), key(y)); });
    if (arg(a, 0, "reverse", false).truthy()) std::reverse(items.begin(), items.end());
    return items;
  }
  if (name == "select") return selectBy(in, a, true, false);
  if (name == "reject") return selectBy(in, a, false, false);
  if (name == "selectattr") return selectBy(in, a, true, true);
  if (name == "rejectattr") return selectBy(in, a, false, true);
  if (name == "map") {
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
  if (name == "int") {
    if (in.isInt()) return in;
    if (in.isFloat()) return static_cast<std::int64_t>(in.asNumber());
    if (in.isBool()) return static_cast<std::int64_t>(in.asBool());
    try {
      return static_cast<std::int64_t>(std::stoll(in.str()));
    } catch (const std::exception&) {
      return arg(a, 0, "default", 0);
    }
  }
  if (name == "float") {
    if (in.isNumber() || in.isBool()) return in.asNumber();
    try {
      return std::stod(in.str());
    } catch (const std::exception&) {
      return arg(a, 0, "default", 0.0);
    }
  }
  if (name == "abs") {
    if (in.isInt()) return in.asInt() < 0 ? -in.asInt() : in.asInt();
    return std::fabs(in.asNumber());
  }
  if (name == "round") {
    const Value precision = arg(a, 0, "precision", 0);
    const double scale = std::pow(10.0, static_cast<double>(precision.isInt() ? precision.asInt() : 0));
    return std::round(in.asNumber() * scale) / scale;
  }
  if (name == "sum" || name == "min" || name == "max") {
    const Array items = iterate(in);
    if (name == "sum") {
      Value total = arg(a, 1, "start", 0);
      for (const Value& v : items) {
        total = total.isInt() && v.isInt() ? Value(total.asInt() + v.asInt()) : Value(total.asNumber() + v.asNumber());
      }
      return total;
    }
    if (items.empty()) return Value::undefined(name);
    Value best = items.front();
    for (const Value& v : items)
      if (name == "min" ? compareLess(v, best) : compareLess(best, v)) best = v;
    return best;
  }
  renderError(fmt::format("filter '{}' is not supported", name));
}

}  // namespace astraflow::jinja
