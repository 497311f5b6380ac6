// The `math` reward's extraction: the final answer of a response (Minerva's answer line, the
// last \boxed{}, an answer line, else the last expression) judged against the reference by
// math_equal.cpp. Every pass over the response is linear in its length (a response can be
// 200,000 characters with thousands of nested braces): braces are paired once by BraceIndex,
// patterns are RE2's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "astraflow/tasks/reward.hpp"
#include "tasks/brace_index.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {

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

namespace {

// The last \boxed{...} or \fbox{...} of a response: its content (empty for an empty box).
std::optional<std::string> lastBox(std::string_view response) {
  std::optional<std::string> boxed;
  std::size_t boxed_at = 0;
  std::optional<detail::BraceIndex> braces;  // paired once, only when the response has a box
  for (const std::string_view cmd : {std::string_view("\\boxed"), std::string_view("\\fbox")}) {
    for (std::size_t at = response.find(cmd); at != std::string_view::npos; at = response.find(cmd, at + 1)) {
      if (boxed && at < boxed_at) continue;
      std::size_t open = at + cmd.size();
      while (open < response.size() && response[open] == ' ') ++open;
      if (!braces) braces.emplace(response);
      const std::size_t close = braces->closeOf(open);
      if (close == std::string_view::npos) continue;
      boxed = std::string(detail::trimSpaces(response.substr(open + 1, close - open - 1)));
      boxed_at = at;
    }
  }
  return boxed;
}

// Math set in the text: $$…$$, $…$, \(…\), \[…\] (their content in the first group that took part;
// an escaped \$ inside is a dollar sign, not the end).
const TextPattern& mathEnvironment() {
  static const TextPattern p(R"(\$\$((?:\\.|[^$\\])+)\$\$|\$((?:\\.|[^$\\\n])+)\$|\\\(([^\n]+?)\\\)|\\\[((?s).+?)\\\])",
                             "the math reward's math environments");
  return p;
}

std::optional<std::string_view> firstGroup(const PatternMatch& m) {
  for (const auto& g : m.groups)
    if (g) return g;
  return std::nullopt;
}

// What an answer line holds: the first math environment in it, else its text up to the end of
// the sentence, without bold marks ("**Answer:** 42") or "I hope it is correct".
std::optional<std::string> answerFromLine(std::string_view line) {
  if (const auto env = mathEnvironment().search(line))
    if (const auto content = firstGroup(*env)) return std::string(detail::trimSpaces(*content));
  std::string text;
  for (std::size_t k = 0; k < line.size(); ++k) {
    if (line.compare(k, 2, "**") == 0) {
      ++k;
      continue;
    }
    // A full stop ends the sentence; one between digits is a decimal point.
    if (line[k] == '.' && (k + 1 == line.size() || line[k + 1] == ' ')) break;
    text += line[k];
  }
  const std::string_view answer = detail::trimSpaces(text);
  if (answer.empty()) return std::nullopt;
  return std::string(answer);
}

// The last number or math environment of the text, whichever ends later: an answer given
// without a box or an answer line (math-verify takes the last expression too).
std::optional<std::string> lastExpression(std::string_view response) {
  static const TextPattern kNumber(R"((?:^|[^\w.\\])(-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?(?:\s*%)?))",
                                   "the math reward's numbers");
  const auto env = mathEnvironment().lastMatch(response);
  const auto number = kNumber.lastMatch(response);
  auto end = [&](const PatternMatch& m) { return m.whole.data() + m.whole.size() - response.data(); };
  if (env && (!number || end(*env) >= end(*number)))
    if (const auto content = firstGroup(*env)) return std::string(detail::trimSpaces(*content));
  if (number && number->groups[0]) return std::string(*number->groups[0]);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> extractFinalAnswer(std::string_view response, const MathRewardOptions& options) {
  // Minerva's answer line (lm-eval's minerva_math): it names its answer before any box.
  static const TextPattern kMinerva(R"((?i)final answer is:?\s*\$((?:\\.|[^$\\])+)\$\.?\s?I hope)",
                                    "the math reward's Minerva answer line");
  if (const auto m = kMinerva.lastMatch(response); m && m->groups[0])
    return std::string(detail::trimSpaces(*m->groups[0]));
  if (auto box = lastBox(response)) {
    if (box->empty()) return std::nullopt;  // the last box is empty: no answer
    return box;
  }
  static const TextPattern kDefault(kDefaultMathAnswerPattern, "the math reward's default answer pattern");
  const TextPattern& pattern = options.fallback ? *options.fallback : kDefault;
  if (const auto last = pattern.lastMatch(response); last && !last->groups.empty() && last->groups[0])
    return answerFromLine(*last->groups[0]);
  if (options.fallback) return std::nullopt;  // the user's pattern says where the answer is
  return lastExpression(response);
}

RewardResult mathReward(std::string_view response, std::string_view reference, const MathRewardOptions& options) {
  if (detail::trimSpaces(reference).empty()) return {0.0, RewardReason::Invalid, ""};
  const auto answer = extractFinalAnswer(response, options);
  if (!answer) return {0.0, RewardReason::NoAnswer, ""};
  const bool equal = mathAnswersEqual(*answer, reference, options.decimals);
  return {equal ? 1.0 : 0.0, equal ? RewardReason::Correct : RewardReason::Wrong, *answer};
}

}  // namespace astraflow
