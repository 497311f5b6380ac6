// The `exact`, `regex` and `choice` rewards (include/astraflow/tasks/reward.hpp).
#include <cctype>
#include <regex>

#include "astraflow/tasks/reward.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

// "B", "(B)", "B." → 'B'; anything else → 0.
char letterOf(std::string_view s) {
  std::string t(detail::trimSpaces(s));
  while (!t.empty() && (t.back() == '.' || t.back() == ')')) t.pop_back();
  while (!t.empty() && t.front() == '(') t.erase(0, 1);
  if (t.size() != 1 || !std::isalpha(static_cast<unsigned char>(t[0]))) return 0;
  return static_cast<char>(std::toupper(static_cast<unsigned char>(t[0])));
}

}  // namespace

RewardResult exactReward(std::string_view response, std::string_view reference) {
  const std::string answer(detail::trimSpaces(response));
  if (answer.empty()) return {0.0, RewardReason::NoAnswer, ""};
  const bool equal = answer == detail::trimSpaces(reference);
  return {equal ? 1.0 : 0.0, equal ? RewardReason::Correct : RewardReason::Wrong, answer};
}

RewardResult regexReward(std::string_view response, const std::string& pattern) {
  try {
    const std::regex re(pattern);
    const std::string text(response);
    std::smatch m;
    if (std::regex_search(text, m, re)) return {1.0, RewardReason::Correct, m.str()};
    return {0.0, RewardReason::Wrong, ""};
  } catch (const std::regex_error&) {
    return {0.0, RewardReason::Invalid, ""};
  }
}

RewardResult choiceReward(std::string_view response, std::string_view reference) {
  const char want = letterOf(reference);
  if (want == 0) return {0.0, RewardReason::Invalid, ""};
  MathRewardOptions options;
  options.fallback_pattern = R"((?:[Aa]nswer\s*(?:is)?\s*[:=]?)\s*\(?([A-Za-z])\b)";
  char got = 0;
  if (const auto answer = extractFinalAnswer(response, options)) got = letterOf(*answer);
  if (got == 0) got = letterOf(response);  // the response is the letter alone
  if (got == 0) return {0.0, RewardReason::NoAnswer, ""};
  return {got == want ? 1.0 : 0.0, got == want ? RewardReason::Correct : RewardReason::Wrong, std::string(1, got)};
}

}  // namespace astraflow
