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
// Every closed \boxed{...} and \fbox{...} of a text: `take(position, content)` with its content
// trimmed, the \boxed ones first, each in order; braces paired once, only when there is a box.
template <class Take>
void forEachBox(std::string_view text, Take take) {
  std::optional<detail::BraceIndex> braces;
  for (const std::string_view cmd : {std::string_view("\\boxed"), std::string_view("\\fbox")}) {
    for (std::size_t at = text.find(cmd); at != std::string_view::npos; at = text.find(cmd, at + 1)) {
      std::size_t open = at + cmd.size();
      while (open < text.size() && text[open] == ' ') ++open;
      if (!braces) braces.emplace(text);
      const std::size_t close = braces->closeOf(open);
      if (close != std::string_view::npos) take(at, detail::trimSpaces(text.substr(open + 1, close - open - 1)));
    }
  }
}

std::optional<std::string> lastBox(std::string_view response) {
  std::optional<std::string> boxed;
  std::size_t boxed_at = 0;
  forEachBox(response, [&](std::size_t at, std::string_view content) {
    if (boxed && at < boxed_at) return;
    boxed = std::string(content);
    boxed_at = at;
  });
  return boxed;
}

// Math set in the text: $$…$$, $…$, \(…\), \[…\] (their content in the first group that took part;
// an escaped \$ inside is a dollar sign, not the end).
struct MathSpan {
  std::string_view content;
  std::size_t end = 0;  // one past its closing delimiter
};

// The first occurrence of `needle` at or after a position, for positions that only grow: a
// search is reused while it still lies ahead, so a text of many unclosed openers costs one pass.
class NextOf {
 public:
  NextOf(std::string_view text, std::string_view needle) : text_(text), needle_(needle) {}
  std::size_t from(std::size_t at) {
    if (!(searched_ && at >= from_ && (found_ == std::string_view::npos || found_ >= at))) {
      found_ = text_.find(needle_, at);
      from_ = at;
      searched_ = true;
    }
    return found_;
  }

 private:
  std::string_view text_, needle_;
  std::size_t from_ = 0, found_ = std::string_view::npos;
  bool searched_ = false;
};

// The math environments of a text, left to right as LaTeX pairs them: $$…$$ and \[…\] (across
// lines), $…$ and \(…\) (within a line; \$ is a dollar sign). An opener that never closes is
// text. `take` returns false to stop. One pass, whatever the text.
template <class Take>
void forEachMathSpan(std::string_view text, Take take) {
  NextOf display_dollar(text, "$$"), display_bracket(text, "\\]"), inline_paren(text, "\\)"), newline(text, "\n");
  for (std::size_t k = 0; k < text.size();) {
    const char c = text[k];
    std::size_t open = 0, close = std::string_view::npos, close_size = 2;
    if (c == '\\' && k + 1 < text.size() && (text[k + 1] == '[' || text[k + 1] == '(')) {
      open = 2;
      close = text[k + 1] == '[' ? display_bracket.from(k + 2) : inline_paren.from(k + 2);
      if (text[k + 1] == '(' && close != std::string_view::npos && newline.from(k + 2) < close)
        close = std::string_view::npos;
    } else if (c == '\\') {
      k += 2;  // an escaped character (\$)
      continue;
    } else if (c == '$' && k + 1 < text.size() && text[k + 1] == '$') {
      open = 2;
      close = display_dollar.from(k + 2);
    } else if (c == '$') {
      open = 1, close_size = 1;
      for (std::size_t e = k + 1; e < text.size() && text[e] != '\n'; ++e) {
        if (text[e] == '\\') {
          ++e;
        } else if (text[e] == '$') {
          close = e;
          break;
        }
      }
    } else {
      ++k;
      continue;
    }
    if (close == std::string_view::npos) {
      k += open;  // never closed: its opener is text
      continue;
    }
    if (!take(MathSpan{text.substr(k + open, close - k - open), close + close_size})) return;
    k = close + close_size;
  }
}

// What an answer line holds: the first math environment in it, else its text up to the end of
// the sentence, without bold marks ("**Answer:** 42") or "I hope it is correct".
std::optional<std::string> answerFromLine(std::string_view line) {
  std::optional<std::string_view> first;
  forEachMathSpan(line, [&](const MathSpan& m) {
    first = m.content;
    return false;
  });
  if (first && !detail::trimSpaces(*first).empty()) return std::string(detail::trimSpaces(*first));
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
  std::optional<MathSpan> env;
  forEachMathSpan(response, [&](const MathSpan& m) {
    if (!detail::trimSpaces(m.content).empty()) env = m;
    return true;
  });
  const auto number = kNumber.lastMatch(response);
  const auto number_end = [&] {
    return static_cast<std::size_t>(number->whole.data() + number->whole.size() - response.data());
  };
  if (env && (!number || env->end >= number_end())) return std::string(detail::trimSpaces(env->content));
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
  if (const auto last = pattern.lastMatch(response); last && !last->groups.empty() && last->groups[0]) {
    if (!options.fallback) return answerFromLine(*last->groups[0]);
    std::string_view answer = detail::trimSpaces(*last->groups[0]);  // the user's group, as it is
    while (!answer.empty() && answer.back() == '.') answer.remove_suffix(1);
    if (answer.empty()) return std::nullopt;
    return std::string(answer);
  }
  if (options.fallback) return std::nullopt;  // the user's pattern says where the answer is
  return lastExpression(response);
}

std::string mathReferenceAnswer(std::string_view reference) {
  std::vector<std::string> boxes;
  forEachBox(reference, [&](std::size_t, std::string_view content) {
    if (!content.empty() && std::find(boxes.begin(), boxes.end(), content) == boxes.end()) boxes.emplace_back(content);
  });
  if (boxes.size() == 1) return boxes[0];
  if (boxes.size() > 1) {  // "the solutions are \boxed{2} and \boxed{5}": the set of them
    std::string set;
    for (const auto& b : boxes) set += (set.empty() ? "" : ", ") + b;
    return set;
  }
  if (const auto hashes = reference.rfind("####"); hashes != std::string_view::npos)
    return std::string(detail::trimSpaces(reference.substr(hashes + 4)));
  return std::string(reference);
}

RewardResult mathReward(std::string_view response, std::string_view reference, const MathRewardOptions& options) {
  const std::string gold = mathReferenceAnswer(reference);
  if (detail::trimSpaces(gold).empty()) return {0.0, RewardReason::Invalid, ""};
  const auto answer = extractFinalAnswer(response, options);
  if (!answer) return {0.0, RewardReason::NoAnswer, ""};
  const bool equal = mathAnswersEqual(*answer, gold, options.decimals);
  return {equal ? 1.0 : 0.0, equal ? RewardReason::Correct : RewardReason::Wrong, *answer};
}

}  // namespace astraflow
