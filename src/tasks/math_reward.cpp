// The `math` reward: the final answer of a response (\boxed{}, else a pattern) against the
// reference, by the equivalence rules of docs/tasks.md. Every pass over the response is linear
// in its length (a response can be 200,000 characters with thousands of nested braces): braces
// are paired once by BraceIndex, replacements build a new string instead of shifting the tail.
#include <algorithm>
#include <cmath>
#include <vector>

#include "astraflow/tasks/reward.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

// s with every `from` replaced by `to`, in one pass.
void replaceAll(std::string& s, std::string_view from, std::string_view to) {
  std::size_t at = s.find(from);
  if (at == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  std::size_t done = 0;
  for (; at != std::string::npos; at = s.find(from, done)) {
    out.append(s, done, at - done);
    out.append(to);
    done = at + from.size();
  }
  out.append(s, done, std::string::npos);
  s = std::move(out);
}

// The matching '}' of every '{' of a text, paired in one pass (\{ and \} are literal braces).
class BraceIndex {
 public:
  explicit BraceIndex(std::string_view s) : close_(s.size(), std::string_view::npos) {
    std::vector<std::size_t> open;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\\' && k + 1 < s.size()) {
        ++k;
        continue;
      }
      if (s[k] == '{') open.push_back(k);
      if (s[k] == '}' && !open.empty()) {
        close_[open.back()] = k;
        open.pop_back();
      }
    }
  }
  // The '}' that closes the '{' at `open`; npos when it is not a '{' or is never closed.
  std::size_t closeOf(std::size_t open) const { return open < close_.size() ? close_[open] : std::string_view::npos; }

 private:
  std::vector<std::size_t> close_;
};

// The brace group that starts at s[open] == '{': its content, and where it ends (one past '}').
// A scan from `open`: for the few groups of a short normalised answer (\frac{a}{b}).
std::optional<std::pair<std::string, std::size_t>> braceGroup(std::string_view s, std::size_t open) {
  if (open >= s.size() || s[open] != '{') return std::nullopt;
  int depth = 0;
  for (std::size_t k = open; k < s.size(); ++k) {
    if (s[k] == '\\' && k + 1 < s.size()) {  // \{ and \} are literal braces
      ++k;
      continue;
    }
    if (s[k] == '{') ++depth;
    if (s[k] == '}' && --depth == 0) return std::make_pair(std::string(s.substr(open + 1, k - open - 1)), k + 1);
  }
  return std::nullopt;
}

// \cmd{X} → X for wrapper commands, everywhere in s, nested ones included, in one pass: each
// \cmd{ is dropped with the '}' that closes it.
void unwrap(std::string& s, std::string_view cmd) {
  if (s.find(cmd) == std::string::npos) return;
  const BraceIndex braces(s);
  std::vector<bool> dropped(s.size(), false);
  std::string out;
  out.reserve(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (dropped[k]) continue;
    if (s.compare(k, cmd.size(), cmd) == 0) {
      const std::size_t close = braces.closeOf(k + cmd.size());
      if (close != std::string::npos) {
        dropped[close] = true;
        k += cmd.size();  // and the '{' with the loop's ++k
        continue;
      }
    }
    out += s[k];
  }
  s = std::move(out);
}

std::string normalise(std::string_view raw) {
  std::string s(detail::trimSpaces(raw));
  // Math delimiters around the whole answer.
  for (const auto& [open, close] : {std::pair{"$$", "$$"}, {"$", "$"}, {"\\(", "\\)"}, {"\\[", "\\]"}}) {
    const std::string o(open), c(close);
    if (s.size() >= o.size() + c.size() && s.compare(0, o.size(), o) == 0 &&
        s.compare(s.size() - c.size(), c.size(), c) == 0)
      s = std::string(detail::trimSpaces(s.substr(o.size(), s.size() - o.size() - c.size())));
  }
  for (const char* cmd : {"\\boxed", "\\text", "\\textbf", "\\mathrm", "\\mathbf", "\\mbox"}) unwrap(s, cmd);
  replaceAll(s, "\\dfrac", "\\frac");
  replaceAll(s, "\\tfrac", "\\frac");
  for (const char* drop : {"\\left", "\\right", "\\displaystyle", "\\!", "\\,", "\\;", "\\:", "\\quad", "\\ ",
                           "^\\circ", "^{\\circ}", "\xC2\xB0", "\\$", "$"})
    replaceAll(s, drop, "");
  replaceAll(s, "\\%", "%");
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; }), s.end());
  while (!s.empty() && s.back() == '.') s.pop_back();
  // "x=5" → "5": a single variable named before the answer.
  if (s.size() > 2 && std::isalpha(static_cast<unsigned char>(s[0])) && s[1] == '=') s.erase(0, 2);
  return s;
}

struct Number {
  double value;
  bool percent;
};

std::optional<double> plainNumber(const std::string& s) {
  static const TextPattern grouped(R"(([+-]?)(\d{1,3}(?:,\d{3})+|\d+)?(\.\d+)?)", "the math reward's numbers");
  if (s.size() > 400) return std::nullopt;  // no number a reference holds; stod would overflow
  const auto m = grouped.fullMatch(s);
  if (!m || (!m->groups[1] && !m->groups[2])) return std::nullopt;
  std::string digits(m->groups[1].value_or(""));
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  const double v = std::stod((digits.empty() ? "0" : digits) + std::string(m->groups[2].value_or("")));
  return m->groups[0] == "-" ? -v : v;
}

std::optional<Number> number(std::string s) {
  bool percent = false;
  if (!s.empty() && s.back() == '%') {
    percent = true;
    s.pop_back();
  }
  bool negative = false;
  if (!s.empty() && s[0] == '-' && s.find("\\frac") == 1) {
    negative = true;
    s.erase(0, 1);
  }
  if (s.rfind("\\frac", 0) == 0) {  // \frac{a}{b} or \frac ab (single characters)
    std::string a, b;
    std::size_t at = 5;
    if (const auto g = braceGroup(s, at)) {
      a = g->first;
      at = g->second;
    } else if (at < s.size()) {
      a = s.substr(at++, 1);
    }
    if (const auto g = braceGroup(s, at)) {
      b = g->first;
      at = g->second;
    } else if (at < s.size()) {
      b = s.substr(at++, 1);
    }
    const auto x = plainNumber(a), y = plainNumber(b);
    if (at != s.size() || !x || !y || *y == 0) return std::nullopt;
    return Number{(negative ? -1 : 1) * *x / *y, percent};
  }
  if (const auto slash = s.find('/'); slash != std::string::npos) {
    const auto x = plainNumber(s.substr(0, slash)), y = plainNumber(s.substr(slash + 1));
    if (!x || !y || *y == 0) return std::nullopt;
    return Number{*x / *y, percent};
  }
  if (const auto v = plainNumber(s)) return Number{*v, percent};
  return std::nullopt;
}

bool close(double a, double b, double tolerance) {
  return std::fabs(a - b) <= tolerance * std::max({std::fabs(a), std::fabs(b), 1e-12});
}

// Top-level comma-separated parts of a bracketed list "(a, b)" / "[a, b)"; nullopt when `s`
// is not one (fewer than two parts).
std::optional<std::vector<std::string>> listParts(const std::string& s) {
  if (s.size() < 2 || (s.front() != '(' && s.front() != '[') || (s.back() != ')' && s.back() != ']'))
    return std::nullopt;
  std::vector<std::string> parts(1);
  int depth = 0;
  for (std::size_t k = 1; k + 1 < s.size(); ++k) {
    const char c = s[k];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  if (parts.size() < 2) return std::nullopt;
  return parts;
}

bool equalNormalised(const std::string& a, const std::string& b, double tolerance) {
  if (a == b) return true;
  if (a.size() > kMathRuleMaxChars || b.size() > kMathRuleMaxChars) return false;
  const auto x = number(a), y = number(b);
  if (x && y) {
    if (x->percent == y->percent) return close(x->value, y->value, tolerance);
    const Number& p = x->percent ? *x : *y;  // 50% is 50 and is 0.5
    const Number& q = x->percent ? *y : *x;
    return close(p.value, q.value, tolerance) || close(p.value / 100.0, q.value, tolerance);
  }
  const auto la = listParts(a), lb = listParts(b);
  if (la && lb) {
    if (a.front() != b.front() || a.back() != b.back() || la->size() != lb->size()) return false;
    for (std::size_t k = 0; k < la->size(); ++k)
      if (!equalNormalised((*la)[k], (*lb)[k], tolerance)) return false;
    return true;
  }
  // "(5)" is 5.
  auto unparen = [](const std::string& s) {
    return s.size() > 2 && s.front() == '(' && s.back() == ')' ? s.substr(1, s.size() - 2) : s;
  };
  if (unparen(a) != a || unparen(b) != b) return equalNormalised(unparen(a), unparen(b), tolerance);
  return false;
}

}  // namespace

const char* rewardReasonName(RewardReason reason) {
  switch (reason) {
    case RewardReason::Correct: return "correct";
    case RewardReason::Wrong: return "wrong";
    case RewardReason::NoAnswer: return "no_answer";
    case RewardReason::Invalid: return "invalid";
    case RewardReason::Timeout: return "timeout";
    case RewardReason::Crashed: return "crashed";
    case RewardReason::MemoryLimit: return "memory_limit";
  }
  return "invalid";
}

std::optional<RewardReason> rewardReasonFromName(std::string_view name) {
  // Every enumerator, MemoryLimit being the last.
  for (int r = 0; r <= static_cast<int>(RewardReason::MemoryLimit); ++r)
    if (name == rewardReasonName(static_cast<RewardReason>(r))) return static_cast<RewardReason>(r);
  return std::nullopt;
}

std::optional<std::string> extractFinalAnswer(std::string_view response, const MathRewardOptions& options) {
  // The last box counts, whichever command spells it.
  std::optional<std::string> boxed;
  std::size_t boxed_at = 0;
  std::optional<BraceIndex> braces;  // paired once, only when the response has a box
  for (const std::string_view cmd : {std::string_view("\\boxed"), std::string_view("\\fbox")}) {
    for (std::size_t at = response.find(cmd); at != std::string_view::npos; at = response.find(cmd, at + 1)) {
      if (boxed && at < boxed_at) continue;
      std::size_t open = at + cmd.size();
      while (open < response.size() && response[open] == ' ') ++open;
      if (!braces) braces.emplace(response);
      const std::size_t close = braces->closeOf(open);
      if (close == std::string_view::npos) continue;
      boxed = std::string(response.substr(open + 1, close - open - 1));
      boxed_at = at;
    }
  }
  if (boxed) {
    const std::string content(detail::trimSpaces(*boxed));
    if (content.empty()) return std::nullopt;
    return content;
  }
  static const TextPattern kDefault(kDefaultMathAnswerPattern, "the math reward's default answer pattern");
  const TextPattern& pattern = options.fallback ? *options.fallback : kDefault;
  const auto last = pattern.lastMatch(response);
  if (!last || last->groups.empty() || !last->groups[0]) return std::nullopt;
  std::string answer(detail::trimSpaces(*last->groups[0]));
  while (!answer.empty() && answer.back() == '.') answer.pop_back();
  if (answer.empty()) return std::nullopt;
  return answer;
}

bool mathAnswersEqual(std::string_view answer, std::string_view reference, double relative_tolerance) {
  return equalNormalised(normalise(answer), normalise(reference), relative_tolerance);
}

RewardResult mathReward(std::string_view response, std::string_view reference, const MathRewardOptions& options) {
  if (normalise(reference).empty()) return {0.0, RewardReason::Invalid, ""};
  const auto answer = extractFinalAnswer(response, options);
  if (!answer) return {0.0, RewardReason::NoAnswer, ""};
  const bool equal = mathAnswersEqual(*answer, reference, options.relative_tolerance);
  return {equal ? 1.0 : 0.0, equal ? RewardReason::Correct : RewardReason::Wrong, *answer};
}

}  // namespace astraflow
