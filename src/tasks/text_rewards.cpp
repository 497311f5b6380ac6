// The `exact`, `regex` and `choice` rewards (include/astraflow/tasks/reward.hpp).
#include <cctype>

#include "astraflow/tasks/reward.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

// "B", "(B)", "B." → 'B'; anything else → 0.
char letterOf(std::string_view s) {
  std::string_view t = detail::trimSpaces(s);
  while (!t.empty() && (t.back() == '.' || t.back() == ')')) t.remove_suffix(1);
  while (!t.empty() && t.front() == '(') t.remove_prefix(1);
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

RewardResult regexReward(std::string_view response, const TextPattern& pattern) {
  if (const auto m = pattern.search(response)) return {1.0, RewardReason::Correct, std::string(m->whole)};
  return {0.0, RewardReason::Wrong, ""};
}

RewardResult choiceReward(std::string_view response, std::string_view reference) {
  const char want = letterOf(reference);
  if (want == 0) return {0.0, RewardReason::Invalid, ""};
  static const auto kLetter = std::make_shared<const TextPattern>(
      R"((?:[Aa]nswer\s*(?:is)?\s*[:=]?)\s*\(?([A-Za-z])\b)", "the choice reward's answer pattern");
  MathRewardOptions options;
  options.fallback = kLetter;
  char got = 0;
  if (const auto answer = extractFinalAnswer(response, options)) got = letterOf(*answer);
  if (got == 0) got = letterOf(response);  // the response is the letter alone
  if (got == 0) return {0.0, RewardReason::NoAnswer, ""};
  return {got == want ? 1.0 : 0.0, got == want ? RewardReason::Correct : RewardReason::Wrong, std::string(1, got)};
}

}  // namespace astraflow
