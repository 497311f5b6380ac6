// The presentation an answer's LaTeX carries and its value does not (docs/tasks.md, "math"):
// math delimiters, \text-like wrappers, units, sizing and spacing commands, degrees, currency.
// One pass over the answer, braces paired as it goes; thousands separators (`,`, `{,}`, `\,`,
// thin spaces) are kept as a marker the tokenizer joins between digit groups.
#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

#include "tasks/brace_index.hpp"
#include "tasks/math_tokens.hpp"
#include "tasks/math_value.hpp"
#include "tasks/text_match.hpp"

namespace astraflow::math {
namespace {

constexpr std::array kUnits = {
    "cm",      "m",       "km",     "mm",     "nm",       "in",        "inch",       "inches",     "ft",
    "feet",    "foot",    "yd",     "yard",   "yards",    "mi",        "mile",       "miles",      "unit",
    "units",   "sq",      "square", "cubic",  "degree",   "degrees",   "dollar",     "dollars",    "cent",
    "cents",   "hour",    "hours",  "hr",     "hrs",      "minute",    "minutes",    "min",        "second",
    "seconds", "sec",     "s",      "h",      "day",      "days",      "week",       "weeks",      "month",
    "months",  "year",    "years",  "g",      "kg",       "mg",        "lb",         "lbs",        "pound",
    "pounds",  "oz",      "ounce",  "ounces", "l",        "ml",        "liter",      "liters",     "litre",
    "litres",  "meter",   "meters", "metre",  "metres",   "kilometer", "kilometers", "centimeter", "centimeters",
    "mph",     "km/h",    "m/s",    "people", "students", "apples",    "times",      "ways",       "point",
    "points",  "percent",
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

bool isUnitWord(std::string_view word) {
  const std::string w = lower(detail::trimSpaces(word));
  return std::find(kUnits.begin(), kUnits.end(), w) != kUnits.end();
}

namespace {

// Commands whose argument is shown as it is (the argument stays, the command goes).
bool isWrapper(std::string_view name) {
  for (const char* w : {"boxed", "fbox", "mathbf", "bm", "boldsymbol", "mathit", "mathsf", "mathnormal", "pmb"})
    if (name == w) return true;
  return false;
}
// Commands whose argument is text: a unit is dropped, other text kept as words.
bool isTextCommand(std::string_view name) {
  for (const char* w :
       {"text", "textbf", "textit", "textrm", "textsf", "textnormal", "mathrm", "mbox", "hbox", "emph", "textup"})
    if (name == w) return true;
  return false;
}
// Commands that only size, space or style.
bool isDropped(std::string_view name) {
  for (const char* w :
       {"left",     "right",      "big",          "Big",    "bigg",         "Bigg",      "bigl",        "bigr",
        "Bigl",     "Bigr",       "biggl",        "biggr",  "displaystyle", "textstyle", "scriptstyle", "limits",
        "nolimits", "dollar",     "circ",         "degree", "quad",         "qquad",     "enspace",     "thinspace",
        "medspace", "thickspace", "negthinspace", "hfill",  "hspace*",      "phantom",   "cdotp"})
    if (name == w) return true;
  return false;
}

// Unicode spellings of what LaTeX spells with commands.
std::string replaceUnicode(std::string_view in) {
  static const std::array<std::pair<std::string_view, std::string_view>, 14> kMap = {{
      {"\xC2\xB0", ""},              // °
      {"\xE2\x80\x89", "\x01"},      // thin space
      {"\xE2\x80\xAF", "\x01"},      // narrow no-break space
      {"\xC2\xA0", " "},             // no-break space
      {"\xE2\x88\x92", "-"},         // minus sign
      {"\xC3\x97", "*"},             // ×
      {"\xC3\xB7", "/"},             // ÷
      {"\xC2\xB7", "*"},             // ·
      {"\xE2\x89\xA4", "\\le "},     // ≤
      {"\xE2\x89\xA5", "\\ge "},     // ≥
      {"\xE2\x89\xA0", "\\ne "},     // ≠
      {"\xCF\x80", "\\pi "},         // π
      {"\xE2\x88\x9E", "\\infty "},  // ∞
      {"\xE2\x88\x9A", "\\sqrt "},   // √
  }};
  std::string out;
  out.reserve(in.size());
  for (std::size_t k = 0; k < in.size();) {
    bool hit = false;
    if (static_cast<unsigned char>(in[k]) >= 0x80)
      for (const auto& [from, to] : kMap)
        if (in.compare(k, from.size(), from) == 0) {
          out += to;
          k += from.size();
          hit = true;
          break;
        }
    if (!hit) out += in[k++];
  }
  return out;
}

// One pass; `depth` bounds the recursion into wrapped arguments.
void cleanInto(std::string_view s, const detail::BraceIndex& braces, std::string& out, int depth);

// After a dropped unit, its exponent goes with it ("\text{ cm}^2").
std::size_t skipExponent(std::string_view s, const detail::BraceIndex& braces, std::size_t at) {
  while (at < s.size() && s[at] == ' ') ++at;
  if (at >= s.size() || s[at] != '^') return at;
  ++at;
  if (at < s.size() && s[at] == '{') {
    const std::size_t close = braces.closeIn(s, at);
    return close == std::string_view::npos ? at : close + 1;
  }
  return std::min(s.size(), at + 1);
}

// `\name{...}` at s[k] == '\\' with name read: the wrapper and text rules; returns where to go on.
std::size_t cleanCommand(std::string_view s, const detail::BraceIndex& braces, std::size_t k, std::string_view name,
                         std::string& out, int depth) {
  std::size_t after = k + 1 + name.size();
  std::size_t open = after;
  while (open < s.size() && s[open] == ' ') ++open;
  const bool has_arg = open < s.size() && s[open] == '{';
  const std::size_t close = has_arg ? braces.closeIn(s, open) : std::string_view::npos;
  if ((isWrapper(name) || isTextCommand(name)) && close != std::string_view::npos) {
    const std::string_view arg = s.substr(open + 1, close - open - 1);
    if (isTextCommand(name)) {
      const std::string_view word = detail::trimSpaces(arg);
      if (word.empty() || isUnitWord(word)) return skipExponent(s, braces, close + 1);
      if (word == "and" || word == "or" || word == ",") {
        out += ',';
        return close + 1;
      }
      out += ' ';
      cleanInto(arg, braces, out, depth + 1);
      out += ' ';
      return close + 1;
    }
    cleanInto(arg, braces, out, depth + 1);
    return close + 1;
  }
  if (name == "operatorname" && close != std::string_view::npos) {  // \operatorname{min}: the command \min
    out += '\\';
    out.append(detail::trimSpaces(s.substr(open + 1, close - open - 1)));
    out += ' ';
    return close + 1;
  }
  if (isDropped(name)) return after;
  if (name == "dfrac" || name == "tfrac" || name == "cfrac") {
    out += "\\frac";
    return after;
  }
  out += '\\';
  out += name;
  out += ' ';  // "\pi2" stays two tokens
  return after;
}

void cleanInto(std::string_view s, const detail::BraceIndex& braces, std::string& out, int depth) {
  if (depth > 64) {
    out.append(s);
    return;
  }
  for (std::size_t k = 0; k < s.size();) {
    const char c = s[k];
    if (c == '\\' && k + 1 < s.size()) {
      const char n = s[k + 1];
      if (std::isalpha(static_cast<unsigned char>(n))) {
        std::size_t e = k + 1;
        while (e < s.size() && std::isalpha(static_cast<unsigned char>(s[e]))) ++e;
        k = cleanCommand(s, braces, k, s.substr(k + 1, e - k - 1), out, depth);
        continue;
      }
      k += 2;
      if (n == '\\' || n == '{' || n == '}') {
        out += '\\';
        out += n;
      } else if (n == ',' || n == ' ' || n == ';' || n == ':' || n == '>') {
        out += kThinSpace;
      } else if (n == '%') {
        out += '%';
      } else if (n != '!' && n != '$') {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (c == '{' && s.compare(k, 3, "{,}") == 0) {
      out += ',';
      k += 3;
      continue;
    }
    if (c == '^' && (s.compare(k, 8, "^{\\circ}") == 0 || s.compare(k, 6, "^\\circ") == 0)) {
      k += s[k + 1] == '{' ? 8 : 6;
      continue;
    }
    if (c == '$') {
      ++k;
      continue;
    }
    out += c == '~' || c == '\t' || c == '\n' || c == '\r' ? ' ' : c;
    ++k;
  }
}

// Delimiters around the whole answer: $…$, $$…$$, \(…\), \[…\].
std::string_view stripDelimiters(std::string_view s) {
  for (bool again = true; again;) {
    again = false;
    s = detail::trimSpaces(s);
    for (const auto& [o, c] : {std::pair{"$$", "$$"}, {"$", "$"}, {"\\(", "\\)"}, {"\\[", "\\]"}}) {
      const std::string_view open(o), close(c);
      if (s.size() >= open.size() + close.size() && s.substr(0, open.size()) == open &&
          s.substr(s.size() - close.size()) == close) {
        s = s.substr(open.size(), s.size() - open.size() - close.size());
        again = true;
        break;
      }
    }
  }
  return s;
}

}  // namespace

std::string cleanLatex(std::string_view raw) {
  const std::string unicode = replaceUnicode(raw);
  std::string out;
  out.reserve(unicode.size());
  const std::string_view answer = stripDelimiters(unicode);
  cleanInto(answer, detail::BraceIndex(answer), out, 0);
  // Spaces, thin spaces and a full stop at the ends are not the answer.
  const std::size_t first = out.find_first_not_of(" \x01");
  if (first == std::string::npos) return {};
  std::size_t last = out.find_last_not_of(" \x01.");
  return last == std::string::npos || last < first ? std::string() : out.substr(first, last - first + 1);
}

}  // namespace astraflow::math
