#pragma once
// The values of the chat-template interpreter (src/text/jinja_*.cpp): Jinja's data model as
// Python gives it to transformers' templates — None, bool, int, float, str, list, dict (in
// insertion order), callables, and Undefined — with Python's truthiness, str(), repr() and the
// json.dumps that transformers' tojson filter calls.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace astraflow::jinja {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};
using Function = std::function<Value(const Arguments&)>;

struct Undefined {
  std::string name;  // what was looked up, for the error when it is used
};
// A namespace() object: attributes that `set ns.x = ...` changes from inside loops.
struct Namespace {
  Object attributes;
};

class Value {
 public:
  using Storage =
      std::variant<Undefined, std::nullptr_t, bool, std::int64_t, double, std::string, std::shared_ptr<Array>,
                   std::shared_ptr<Object>, std::shared_ptr<Function>, std::shared_ptr<Namespace>>;

  Value() : v_(Undefined{}) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  Value(Function f) : v_(std::make_shared<Function>(std::move(f))) {}
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  static Value undefined(std::string name) { return Value(Storage(Undefined{std::move(name)})); }

  bool isUndefined() const { return std::holds_alternative<Undefined>(v_); }
  bool isNone() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isInt() const { return std::holds_alternative<std::int64_t>(v_); }
  bool isFloat() const { return std::holds_alternative<double>(v_); }
  bool isNumber() const { return isInt() || isFloat(); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isArray() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }
  bool isObject() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }
  bool isCallable() const { return std::holds_alternative<std::shared_ptr<Function>>(v_); }
  bool isNamespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(v_); }

  bool asBool() const { return std::get<bool>(v_); }
  std::int64_t asInt() const { return std::get<std::int64_t>(v_); }
  double asNumber() const {
    return isInt() ? static_cast<double>(asInt()) : isBool() ? asBool() : std::get<double>(v_);
  }
  const std::string& asString() const { return std::get<std::string>(v_); }
  const Array& asArray() const { return *std::get<std::shared_ptr<Array>>(v_); }
  const Object& asObject() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Function& asCallable() const { return *std::get<std::shared_ptr<Function>>(v_); }
  Namespace& asNamespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const std::string& undefinedName() const { return std::get<Undefined>(v_).name; }

  // The dict entry `key`, or nullptr.
  const Value* find(const std::string& key) const;

  bool truthy() const;                    // Python's bool()
  std::string str() const;                // Python's str() (what {{ }} prints)
  std::string repr() const;               // Python's repr()
  std::string typeName() const;           // Python's type name, for errors
  bool operator==(const Value& o) const;  // Python's ==

 private:
  explicit Value(Storage s) : v_(std::move(s)) {}
  Storage v_;
};

// Python's float repr (shortest round trip; exponent form below 1e-4 and from 1e16).
std::string pythonFloat(double d);

// json.dumps(value, ensure_ascii=False, indent=indent (< 0: none), sort_keys=False), as
// transformers' tojson filter calls it.
std::string toJson(const Value& v, int indent);

// A conversation or tool list given as JSON, in its key order.
Value fromJson(const nlohmann::ordered_json& j);

}  // namespace astraflow::jinja
