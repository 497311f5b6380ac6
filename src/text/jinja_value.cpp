// jinja::Value: Python's truthiness, str(), repr() and equality for the chat-template interpreter's values, and
// toJson / fromJson, the json.dumps that transformers' tojson filter calls.
#include "text/jinja_value.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "astraflow/core/error.hpp"

namespace astraflow::jinja {
namespace {

void appendJsonString(std::string& out, const std::string& s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7F)
          out += fmt::format("\\u{:04x}", c);
        else
          out += ch;
    }
  }
  out += '"';
}

void appendJson(std::string& out, const Value& v, int indent, int depth) {
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * level), ' ');
  };
  const char* item_separator = indent < 0 ? ", " : ",";
  if (v.isNone() || v.isUndefined()) {
    out += "null";
  } else if (v.isBool()) {
    out += v.asBool() ? "true" : "false";
  } else if (v.isInt()) {
    out += std::to_string(v.asInt());
  } else if (v.isFloat()) {
    const double d = v.asNumber();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : pythonFloat(d);
  } else if (v.isString()) {
    appendJsonString(out, v.asString());
  } else if (v.isArray()) {
    const Array& a = v.asArray();
    if (a.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i) out += item_separator;
      newline(depth + 1);
      appendJson(out, a[i], indent, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.isObject() || v.isNamespace()) {
    const Object& o = v.isObject() ? v.asObject() : v.asNamespace().attributes;
    if (o.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t i = 0; i < o.size(); ++i) {
      if (i) out += item_separator;
      newline(depth + 1);
      appendJsonString(out, o[i].first);
      out += ": ";
      appendJson(out, o[i].second, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  } else {
    throw Error(fmt::format("chat template: tojson cannot write a {}", v.typeName()));
  }
}

std::string pythonStringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\')
      out += {'\\', ch};
    else if (ch == '\n')
      out += "\\n";
    else if (ch == '\r')
      out += "\\r";
    else if (ch == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  out += quote;
  return out;
}

}  // namespace

std::string pythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // [-]d[.ddd]e±XX, shortest round trip
  const auto e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto whole = static_cast<std::size_t>(exponent + 1);
    if (digits.size() <= whole)
      out += digits + std::string(whole - digits.size(), '0') + ".0";
    else
      out += digits.substr(0, whole) + "." + digits.substr(whole);
  }
  return out;
}

const Value* Value::find(const std::string& key) const {
  const Object* o = isObject() ? &asObject() : isNamespace() ? &asNamespace().attributes : nullptr;
  if (o == nullptr) return nullptr;
  for (const auto& [k, v] : *o)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  if (isUndefined() || isNone()) return false;
  if (isBool()) return asBool();
  if (isInt()) return asInt() != 0;
  if (isFloat()) return asNumber() != 0.0;
  if (isString()) return !asString().empty();
  if (isArray()) return !asArray().empty();
  if (isObject()) return !asObject().empty();
  return true;
}

std::string Value::str() const {
  if (isUndefined()) return "";
  if (isString()) return asString();
  return repr();
}

std::string Value::repr() const {
  if (isUndefined()) return "";
  if (isNone()) return "None";
  if (isBool()) return asBool() ? "True" : "False";
  if (isInt()) return std::to_string(asInt());
  if (isFloat()) return pythonFloat(asNumber());
  if (isString()) return pythonStringRepr(asString());
  if (isArray()) {
    std::string out = "[";
    for (std::size_t i = 0; i < asArray().size(); ++i) out += (i ? ", " : "") + asArray()[i].repr();
    return out + "]";
  }
  if (isObject()) {
    std::string out = "{";
    for (std::size_t i = 0; i < asObject().size(); ++i)
      out += (i ? ", " : "") + pythonStringRepr(asObject()[i].first) + ": " + asObject()[i].second.repr();
    return out + "}";
  }
  if (isNamespace()) return "<Namespace>";
  return "<function>";
}

std::string Value::typeName() const {
  if (isUndefined()) return fmt::format("undefined ('{}')", undefinedName());
  if (isNone()) return "none";
  if (isBool()) return "bool";
  if (isInt()) return "int";
  if (isFloat()) return "float";
  if (isString()) return "string";
  if (isArray()) return "list";
  if (isObject()) return "dict";
  if (isNamespace()) return "namespace";
  return "function";
}

bool Value::operator==(const Value& o) const {
  if ((isNumber() || isBool()) && (o.isNumber() || o.isBool())) return asNumber() == o.asNumber();
  if (isUndefined() || o.isUndefined()) return isUndefined() && o.isUndefined();
  if (v_.index() != o.v_.index()) return false;
  if (isNone()) return true;
  if (isString()) return asString() == o.asString();
  if (isArray()) return asArray() == o.asArray();
  if (isObject()) {
    if (asObject().size() != o.asObject().size()) return false;
    for (const auto& [k, v] : asObject()) {
      const Value* other = o.find(k);
      if (other == nullptr || !(*other == v)) return false;
    }
    return true;
  }
  if (isCallable()) return &asCallable() == &o.asCallable();
  return &asNamespace() == &o.asNamespace();
}

std::string toJson(const Value& v, int indent) {
  std::string out;
  appendJson(out, v, indent, 0);
  return out;
}

Value fromJson(const nlohmann::ordered_json& j) {
  if (j.is_null()) return nullptr;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array()) {
    Array a;
    for (const auto& e : j) a.push_back(fromJson(e));
    return a;
  }
  Object o;
  for (const auto& [k, e] : j.items()) o.emplace_back(k, fromJson(e));
  return o;
}

}  // namespace astraflow::jinja
