#pragma once
// Verifiable rewards for text tasks (docs/tasks.md): the `math` answer verifier and the
// `exact`, `regex` and `choice` rewards. Each returns a reward and the reason it got it, which
// traces and run summaries count, so a run can show why its rewards were 0.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "astraflow/core/text_pattern.hpp"

namespace astraflow {

enum class RewardReason { Correct, Wrong, NoAnswer, Invalid, Timeout, Crashed, MemoryLimit };
// "correct", "wrong", "no_answer", "invalid" (the reference or configuration cannot be used),
// and for the rewards that run programs (code_reward.hpp, command_reward.hpp) "timeout",
// "crashed" (ended by a signal, or the command failed), "memory_limit".
const char* rewardReasonName(RewardReason reason);
// The reason of that name; nullopt for any other text.
std::optional<RewardReason> rewardReasonFromName(std::string_view name);

struct RewardResult {
  double reward = 0.0;
  RewardReason reason = RewardReason::NoAnswer;
  std::string answer;  // what was extracted from the response (empty for no_answer)
};

// The answer pattern the math reward uses without \boxed{}: GSM8K's "#### 42" and "Answer: 42".
inline constexpr const char* kDefaultMathAnswerPattern =
    R"((?:####|[Aa]nswer(?:\s*is\b)?\s*[:=]|[Aa]nswer\s+is\b)\s*([^\n]+))";

// Answers longer than this (normalised) are equal to the reference only as identical text: the
// rules for numbers, lists and parentheses peel a layer per step, and a policy's 200,000
// nested parentheses must not cost 200,000 passes over itself (docs/tasks.md).
inline constexpr std::size_t kMathRuleMaxChars = 4096;

struct MathRewardOptions {
  // Used when the response has no \boxed{}: an RE2 pattern (core/text_pattern.hpp) whose first
  // group is the answer; its last match counts. Null: kDefaultMathAnswerPattern.
  std::shared_ptr<const TextPattern> fallback;
  double relative_tolerance = 1e-6;  // numbers within it of the reference (relative) are equal
};

// The content of the last \boxed{...} (or \fbox{...}) of `response`, braces matched; else the
// fallback pattern's last match; else nothing. An empty box is no answer.
std::optional<std::string> extractFinalAnswer(std::string_view response, const MathRewardOptions& options = {});

// Whether `answer` and `reference` are the same mathematical answer under the rules of
// docs/tasks.md: LaTeX wrappers dropped ($…$, \text{}, \left \right, spacing commands, \dfrac,
// degrees), numbers compared by value within the relative tolerance (thousands separators,
// decimals, fractions a/b and \frac{a}{b}, percentages as p or p/100, signs), tuples and
// intervals element by element in order with matching brackets, and anything else as
// normalised text.
bool mathAnswersEqual(std::string_view answer, std::string_view reference, double relative_tolerance = 1e-6);

RewardResult mathReward(std::string_view response, std::string_view reference, const MathRewardOptions& options = {});
// The whole response, trimmed, equals the reference.
RewardResult exactReward(std::string_view response, std::string_view reference);
// `pattern` matches somewhere in the response; the answer is the matched text.
RewardResult regexReward(std::string_view response, const TextPattern& pattern);
// The multiple-choice letter of the response (the last \boxed{X}, "Answer: X", or a lone
// letter) equals the reference letter, case-insensitively.
RewardResult choiceReward(std::string_view response, std::string_view reference);

}  // namespace astraflow
