#pragma once
// The filters, tests, attribute lookups and str/dict methods chat templates use, with Jinja2's
// and Python's semantics (src/text/jinja_builtins.cpp); the parser refuses any other filter or
// test by name.
#include <string>

#include "text/jinja_value.hpp"

namespace astraflow::jinja {

bool isKnownFilter(const std::string& name);
bool isKnownTest(const std::string& name);

Value applyFilter(const std::string& name, const Value& input, const Arguments& args);
bool applyTest(const std::string& name, const Value& value, const Arguments& args);

// Jinja's getattr (x.name): a method of str/dict, else the dict entry; Undefined when missing.
Value getAttribute(const Value& object, const std::string& name);
// Jinja's getitem (x[key]): the entry or element (negative indices from the end), else the
// attribute; Undefined when missing.
Value getItem(const Value& object, const Value& key);
// x[start:stop:step] of a list or string.
Value getSlice(const Value& object, const Value& start, const Value& stop, const Value& step);

// Python's len(): code points of a string, elements of a list, entries of a dict.
std::int64_t length(const Value& v);
// Python's iteration: list elements, dict keys, string code points; Undefined is empty.
Array iterate(const Value& v);

// Throws Error "chat template: <what>" (for errors found while rendering).
[[noreturn]] void renderError(const std::string& what);

// Python's string operations and argument handling, shared by the methods and the filters.
namespace detail {
std::string strip(const std::string& s, const Value& chars, bool left, bool right);
std::string replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);
std::string mapAscii(std::string s, int (*f)(int));
std::string title(const std::string& s);
std::string escapeHtml(const std::string& s);
std::string indent(const std::string& s, const Value& width, bool first, bool blank);
// Positional argument i, else the named one, else the fallback.
Value arg(const Arguments& a, std::size_t i, const char* name, Value fallback = Value());
std::string requireString(const Value& v, const char* what);
bool compareLess(const Value& a, const Value& b);
// select/reject (by_attribute: selectattr/rejectattr) with the test named in the arguments.
Array selectBy(const Value& input, const Arguments& args, bool keep, bool by_attribute);
}  // namespace detail

}  // namespace astraflow::jinja
