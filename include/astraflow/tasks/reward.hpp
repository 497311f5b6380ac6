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

// The answer lines the math reward reads without \boxed{}: "The final answer is X", GSM8K's
// "#### 42", "Answer: 42", "**Answer:** 42", "The answer is 42", "answer = 42" (the last counts).
inline constexpr const char* kDefaultMathAnswerPattern =
    R"((?i)(?:final answer[^\n]{0,100}?\s+is\b|####|\banswer(?:\s+is)?\s*(?:\*\*)?\s*[:=]|\banswer\s+is\b))"
    R"(\s*:?\s*([^\n]+))";

// Answers longer than this are equal to the reference only as identical cleaned text: a final
// answer is short, and a policy's 200,000-character box is not worth parsing (docs/tasks.md).
inline constexpr std::size_t kMathRuleMaxChars = 4096;

struct MathRewardOptions {
  // Used when the response has no \boxed{}: an RE2 pattern (core/text_pattern.hpp) whose first
  // group is the answer; its last match counts. Null: kDefaultMathAnswerPattern.
  std::shared_ptr<const TextPattern> fallback;
  // An answer written with a decimal point equals a value that agrees with it rounded to this
  // many places (math-verify's float_rounding); exact numbers are compared exactly.
  int decimals = 6;
};

// The final answer of `response`, in this order: Minerva's "final answer is $X$. I hope it is
// correct"; the content of the last \boxed{...} (or \fbox{...}), braces matched (an empty last
// box is no answer); the last answer line (the fallback pattern, default kDefaultMathAnswerPattern:
// its first math environment, else its sentence); without a fallback pattern, the last number
// or math environment of the text. Nothing when none is there.
std::optional<std::string> extractFinalAnswer(std::string_view response, const MathRewardOptions& options = {});

// Whether `answer` and `reference` are the same mathematics under the rules of docs/tasks.md:
// both read as values (LaTeX presentation and units dropped; numbers exact, a decimal rounded to
// `decimals` places; expressions by algebra (GiNaC); relations, sets in any order, tuples and
// intervals in order, unions, matrices), else compared as cleaned text.
bool mathAnswersEqual(std::string_view answer, std::string_view reference, int decimals = 6);

// The final answer a reference stands for: a worked solution's boxed answer (several distinct
// boxes: the set of them, "2, 5"), else what follows its last "####" (GSM8K), else the whole.
std::string mathReferenceAnswer(std::string_view reference);

RewardResult mathReward(std::string_view response, std::string_view reference, const MathRewardOptions& options = {});
// The whole response, trimmed, equals the reference.
RewardResult exactReward(std::string_view response, std::string_view reference);
// `pattern` matches somewhere in the response; the answer is the matched text.
RewardResult regexReward(std::string_view response, const TextPattern& pattern);
// The multiple-choice letter of the response (the last \boxed{X}, "Answer: X", or a lone
// letter) equals the reference letter, case-insensitively.
RewardResult choiceReward(std::string_view response, std::string_view reference);

}  // namespace astraflow
