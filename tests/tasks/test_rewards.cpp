// The verifiable rewards, table-driven: 100+ (response, reference) cases of the `math` verifier
// with the traps the field knows (empty and nested boxes, two boxes, thousands separators,
// 0.5 vs \frac12, 50% vs 0.5, prose without a box, large integers one apart), then `exact`,
// `regex` and `choice`. tests/tasks/test_math_parity.cpp holds it to math-verify at scale.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/reward.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

struct Case {
  const char* response;
  const char* reference;
  RewardReason reason;  // Correct (reward 1) or another (reward 0)
};

RewardSpec specOf(const std::string& kind, const std::string& pattern) {
  RewardSpec s;
  s.kind = enumByName(kRewardKindNames, kind).value();
  s.pattern = pattern;
  return s;
}

constexpr RewardReason C = RewardReason::Correct;
constexpr RewardReason W = RewardReason::Wrong;
constexpr RewardReason N = RewardReason::NoAnswer;
constexpr RewardReason I = RewardReason::Invalid;

const std::vector<Case> kMath = {
    // Plain integers and signs.
    {"\\boxed{42}", "42", C},
    {"The answer is \\boxed{42}.", "42", C},
    {"\\boxed{ 42 }", "42", C},
    {"\\boxed{41}", "42", W},
    {"\\boxed{-3}", "-3", C},
    {"\\boxed{3}", "-3", W},
    {"\\boxed{+7}", "7", C},
    {"\\boxed{007}", "7", C},
    {"\\boxed{0}", "0", C},
    {"\\boxed{-0}", "0", C},
    // Thousands separators.
    {"\\boxed{1,000}", "1000", C},
    {"\\boxed{1000}", "1,000", C},
    {"\\boxed{12,345,678}", "12345678", C},
    {"\\boxed{1,00}", "100", W},  // not groups of three: not a number
    {"\\boxed{1,000.5}", "1000.5", C},
    // Decimals and tolerance.
    {"\\boxed{0.5}", "0.5", C},
    {"\\boxed{.5}", "0.5", C},
    {"\\boxed{0.50}", "0.5", C},
    {"\\boxed{3.14159}", "3.14159", C},
    {"\\boxed{3.14}", "3.14159", W},
    {"\\boxed{0.3333333333}", "1/3", C},
    {"\\boxed{0.333}", "1/3", W},
    {"\\boxed{2.0}", "2", C},
    {"\\boxed{1e-3}", "0.001", W},  // scientific notation is text, not a number
    // Fractions.
    {"\\boxed{\\frac{1}{2}}", "0.5", C},
    {"\\boxed{0.5}", "\\frac12", C},
    {"\\boxed{\\frac12}", "1/2", C},
    {"\\boxed{\\dfrac{3}{4}}", "0.75", C},
    {"\\boxed{\\tfrac{3}{4}}", "3/4", C},
    {"\\boxed{-\\frac{2}{3}}", "-2/3", C},
    {"\\boxed{\\frac{2}{3}}", "-2/3", W},
    {"\\boxed{6/8}", "3/4", C},
    {"\\boxed{\\frac{10}{4}}", "2.5", C},
    {"\\boxed{\\frac{1}{0}}", "1/0", W},  // no value: compared as text, which differs
    {"\\boxed{\\frac{1}{3}}", "0.33", W},
    // Percentages: p% is p and is p/100.
    {"\\boxed{50\\%}", "50", C},
    {"\\boxed{50%}", "0.5", C},
    {"\\boxed{0.5}", "50%", C},
    {"\\boxed{50}", "50%", C},
    {"\\boxed{25\\%}", "0.5", W},
    {"\\boxed{12.5%}", "0.125", C},
    // LaTeX wrappers.
    {"\\boxed{$42$}", "42", C},
    {"$\\boxed{42}$", "42", C},
    {"\\boxed{\\text{42}}", "42", C},
    {"\\boxed{42 \\text{ apples}}", "42", C},  // a unit word after a number is dropped
    {"\\boxed{5 \\text{ cm}}", "5", C},
    {"\\boxed{5\\text{ cm}^2}", "5", C},
    {"\\boxed{6 \\text{ cm}}", "5", W},
    {"\\boxed{\\left( 1, 2 \\right)}", "(1,2)", C},
    {"\\boxed{90^\\circ}", "90", C},
    {"\\boxed{90^{\\circ}}", "90", C},
    {"\\boxed{\\$5}", "5", C},
    {"\\boxed{\\textbf{7}}", "7", C},
    {"\\boxed{\\mathrm{7}}", "7", C},
    {"\\boxed{\\displaystyle \\frac{1}{2}}", "1/2", C},
    {"\\boxed{x = 5}", "5", C},
    {"\\boxed{x=5}", "x=5", C},
    {"\\boxed{y = 6}", "5", W},
    {"\\boxed{\\sqrt{2}}", "\\sqrt{2}", C},
    {"\\boxed{\\sqrt{2}}", "\\sqrt{3}", W},
    {"\\boxed{\\sqrt2}", "\\sqrt{2}", C},  // brace-less arguments
    {"\\boxed{2\\sqrt3}", "\\sqrt{12}", C},
    {"\\boxed{\\frac94}", "2.25", C},
    {"\\boxed{2\\pi}", "2\\pi", C},
    {"\\boxed{x^2+1}", "x^2 + 1", C},
    {"\\boxed{x^2+1}", "1+x^2", C},  // algebra
    {"\\boxed{(x+1)(x-1)}", "x^2-1", C},
    {"\\boxed{(x+1)(x+1)}", "x^2-1", W},
    // Tuples and intervals.
    {"\\boxed{(1, 2)}", "(1,2)", C},
    {"\\boxed{(2, 1)}", "(1,2)", W},
    {"\\boxed{(1, 2, 3)}", "(1,2)", W},
    {"\\boxed{[1, 2)}", "[1,2)", C},
    {"\\boxed{(1, 2]}", "[1,2)", W},
    {"\\boxed{(0.5, \\frac{1}{4})}", "(1/2, 0.25)", C},
    {"\\boxed{(1,000, 2)}", "(1000, 2)", C},  // a group of three after a comma is a thousands group
    {"\\boxed{(-1, 3)}", "(-1,3)", C},
    {"\\boxed{(5)}", "5", C},
    {"\\boxed{[-\\frac{1}{2}, 4]}", "[-0.5, 4]", C},
    // Boxes: nested braces, several, empty, spelled \fbox.
    {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}", C},
    {"\\boxed{{42}}", "42", C},  // a brace group is a group
    {"first \\boxed{1} then \\boxed{2}", "2", C},
    {"first \\boxed{1} then \\boxed{2}", "1", W},
    {"\\boxed{}", "42", N},
    {"\\boxed{ }", "42", N},
    {"\\boxed{42} and finally \\boxed{}", "42", N},
    {"\\fbox{42}", "42", C},
    {"\\boxed {42}", "42", C},
    {"\\boxed{42", "42", C},  // never closed: the last expression
    {"\\boxed{", "42", N},
    {"\\boxed{\\{1, 2\\}}", "\\{1,2\\}", C},
    // No box: the fallback pattern.
    {"so 6 * 7 = 42\n#### 42", "42", C},
    {"#### 1,234", "1234", C},
    {"Answer: 42", "42", C},
    {"The answer is 42.", "42", C},
    {"answer = 3/4", "0.75", C},
    {"#### 41\nwait, #### 42", "42", C},  // the last match counts
    {"Answer: 7\n", "8", W},
    {"I think it is 42.", "42", C},  // no box or answer line: the last expression
    {"I think it is 41.", "42", W},
    {"42", "42", C},
    {"the sum is $\\frac{1}{2}$ in the end", "0.5", C},
    {"I cannot tell.", "42", N},
    {"", "42", N},
    {"The box is \\boxed{42} but #### 41", "42", C},  // a box wins over the pattern
    // References in the same forms.
    {"\\boxed{42}", "$42$", C},
    {"\\boxed{42}", "\\boxed{42}", C},
    {"\\boxed{42}", "42.", C},
    {"\\boxed{42}", "", I},
    {"\\boxed{42}", "  ", I},
    // Text answers.
    {"\\boxed{\\text{yes}}", "yes", C},
    {"\\boxed{No}", "no", C},  // letters without case, as math-verify reads them
    {"\\boxed{\\text{Yes}}", "no", W},
    {"\\boxed{A}", "A", C},
    {"\\boxed{\\infty}", "\\infty", C},
    {"\\boxed{-\\infty}", "\\infty", W},
    {"\\boxed{10^{6}}", "10^6", C},
    {"\\boxed{10^{6}}", "1000000", C},
    {"\\boxed{\\frac{a}{b}}", "\\frac{a}{b}", C},
    // Found against math-verify (issue 57): no reward for a wrong answer near a large integer or
    // a percent of the wrong size; the forms a right answer takes.
    {"\\boxed{2016001}", "2016000", W},
    {"\\boxed{1000000006}", "1000000007", W},
    {"\\boxed{123456789012345678901}", "123456789012345678900", W},
    {"\\boxed{0.5\\%}", "0.5", W},
    {"\\boxed{1{,}000}", "1000", C},
    {"\\boxed{3\\,000}", "3000", C},
    {"\\boxed{\\{3,2\\}}", "\\{2,3\\}", C},
    {"\\boxed{\\{3,4\\}}", "\\{2,3\\}", W},
    {"\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", C},
    {"\\boxed{\\begin{pmatrix} 1 \\\\ 3 \\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", W},
    {"Final Answer: The final answer is $42$. I hope it is correct.", "42", C},
    {"**Answer:** 42", "42", C},
    {"**Answer:** 41", "42", W},
    {"so the result is 3 and then 42", "42", C},
    {"\\boxed{\\pm 2}", "2", W},
    {"\\boxed{\\pm 2}", "\\{2, -2\\}", C},
    {"\\boxed{(-\\infty, 1) \\cup (2, \\infty)}", "(2,\\infty)\\cup(-\\infty,1)", C},
    {"\\boxed{y = 2x + 1}", "2x+1=y", C},
    {"\\boxed{x > 2}", "2 < x", C},
    // Found by a review: identities that hold only for positive x, differences that vanish only
    // to a tolerance, words read as units, percents and numbers side by side.
    {"\\boxed{|x|}", "x", W},
    {"\\boxed{\\sqrt{x^2}}", "x", W},
    {"\\boxed{\\ln x + C}", "\\ln|x| + C", W},
    {"\\boxed{(x-y)^{20}}", "0", W},
    {"\\boxed{10^{28}+x}", "10^{28}", W},
    {"\\boxed{10^{30}+\\sqrt{2}}", "10^{30}", W},
    {"\\boxed{(a+b+c+d)^{64}}", "(a+b+c+d)^{64}+1", W},
    {"\\boxed{2xyz}", "2", W},
    {"\\boxed{5 \\text{ million}}", "5", W},
    {"\\boxed{(20\\%)(50)}", "1000", W},
    {"\\boxed{(20\\%)(50)}", "10", C},
    {"\\boxed{2 500}", "1000", W},
    {"\\boxed{1 000 000}", "1000000", C},
    {"\\boxed{3 \\times 10^{-9}}", "1.5 \\times 10^{-8}", W},
    {"\\boxed{0.0000001}", "0", W},
    {"\\boxed{[1, 2)}", "\\{1, 2\\}", W},
    {"\\boxed{\\text{No}}", "\\text{On}", W},
    {"\\boxed{\\sin 2x}", "2\\sin x\\cos x", C},
    {"\\boxed{\\arcsin x}", "\\sin^{-1} x", C},
    {"\\boxed{\\sqrt2.25}", "\\sqrt{2}", W},
    {"\\boxed{\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", W},
    {"\\boxed{\\operatorname{min}(4,6)}", "(4,6)", W},
    // A worked reference stands for its final answer: GSM8K's "#### 42", MATH's last box.
    {"\\boxed{42}", "6 times 7 is 42.\n#### 42", C},
    {"\\boxed{41}", "6 times 7 is 42.\n#### 42", W},
    {"\\boxed{\\frac12}", "So $x = \\boxed{\\frac{1}{2}}$.", C},
    {"\\boxed{5}", "The solutions are $\\boxed{2}$ and $\\boxed{5}$.", W},  // several boxes: their set
    {"\\boxed{5, 2}", "The solutions are $\\boxed{2}$ and $\\boxed{5}$.", C},
    {"\\boxed{0.0000005}", "0.0000014", W},  // near 0, rounding does not merge them
    {"\\boxed{0.00000100}", "0.000001", C},
};

TEST(MathReward, Table) {
  ASSERT_GE(kMath.size(), 100u);
  int wrong = 0;
  for (std::size_t i = 0; i < kMath.size(); ++i) {
    const Case& c = kMath[i];
    const RewardResult r = mathReward(c.response, c.reference);
    const bool ok = r.reason == c.reason && r.reward == (c.reason == C ? 1.0 : 0.0);
    if (!ok) {
      ++wrong;
      ADD_FAILURE() << "case " << i << ": " << c.response << " vs " << c.reference << " -> "
                    << rewardReasonName(r.reason) << " (answer \"" << r.answer << "\"), expected "
                    << rewardReasonName(c.reason);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(MathReward, ExtractionAndOptions) {
  EXPECT_EQ(extractFinalAnswer("x \\boxed{\\frac{1}{2}} y").value(), "\\frac{1}{2}");
  EXPECT_EQ(extractFinalAnswer("#### 12.").value(), "12");
  EXPECT_FALSE(extractFinalAnswer("no answer here").has_value());
  EXPECT_EQ(extractFinalAnswer("The answer is: 17").value(), "17");
  MathRewardOptions custom;
  custom.fallback = std::make_shared<const TextPattern>(R"(RESULT<(\d+)>)");
  EXPECT_EQ(mathReward("blah RESULT<9> blah", "9", custom).reason, RewardReason::Correct);
  EXPECT_EQ(mathReward("RESULT<8> then RESULT<9>", "9", custom).reason, RewardReason::Correct);  // the last
  EXPECT_EQ(mathReward("#### 9", "9", custom).reason, RewardReason::NoAnswer);
  // The user's group is the answer as it is: not cut at a full stop or a dollar sign.
  MathRewardOptions whole;
  whole.fallback = std::make_shared<const TextPattern>(R"(RESULT<<(.*)>>)");
  EXPECT_EQ(extractFinalAnswer("RESULT<<3. 5>>", whole).value(), "3. 5");
  // A pattern that cannot compile is a configuration error naming the key, not a reward.
  EXPECT_THROW(RewardFunction(specOf("math", "(unclosed")), Error);
  EXPECT_THROW(RewardFunction(specOf("math", "no group")), Error);
  EXPECT_THROW(RewardFunction(specOf("regex", "(a)\\1")), Error);  // no backreferences
  try {
    RewardFunction(specOf("regex", "(unclosed"));
    ADD_FAILURE() << "a broken pattern compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("environment.reward.pattern"), std::string::npos) << e.what();
  }
  MathRewardOptions two_places;
  two_places.decimals = 2;
  EXPECT_EQ(mathReward("\\boxed{3.14}", "3.14159").reason, RewardReason::Wrong);
  EXPECT_EQ(mathReward("\\boxed{3.14}", "3.14159", two_places).reason, RewardReason::Correct);
  EXPECT_EQ(mathReward("\\boxed{3.15}", "3.14159", two_places).reason, RewardReason::Wrong);
}

TEST(TextRewards, ExactRegexChoice) {
  EXPECT_EQ(exactReward("  Paris\n", "Paris").reason, RewardReason::Correct);
  EXPECT_EQ(exactReward("paris", "Paris").reason, RewardReason::Wrong);
  EXPECT_EQ(exactReward("   ", "Paris").reason, RewardReason::NoAnswer);
  const TextPattern four(R"(\b\d{4}\b)");
  EXPECT_EQ(regexReward("the code is 1234", four).reason, RewardReason::Correct);
  EXPECT_EQ(regexReward("the code is 1234", four).answer, "1234");
  EXPECT_EQ(regexReward("the code is 123", four).reason, RewardReason::Wrong);
  EXPECT_EQ(choiceReward("The answer is (B).", "B").reason, RewardReason::Correct);
  EXPECT_EQ(choiceReward("\\boxed{c}", "C").reason, RewardReason::Correct);
  EXPECT_EQ(choiceReward("Answer: D", "(d)").reason, RewardReason::Correct);
  EXPECT_EQ(choiceReward(" A ", "A").reason, RewardReason::Correct);
  EXPECT_EQ(choiceReward("Answer: A", "B").reason, RewardReason::Wrong);
  EXPECT_EQ(choiceReward("I am not sure", "B").reason, RewardReason::NoAnswer);
  EXPECT_EQ(choiceReward("A", "banana").reason, RewardReason::Invalid);
}

// `astraflow reward --kind math` gives the library's verdict for every table case, in order,
// and answers a malformed line in place (exit code 3).
TEST(RewardCli, MathTableThroughTheCommand) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "run under ctest";
  test::TempDir dir;
  {
    std::ofstream in(dir.file("in.jsonl"));
    for (const Case& c : kMath)
      in << nlohmann::json{{"response", c.response}, {"reference", c.reference}}.dump() << "\n";
    in << "{\"reference\": \"1\"}\n";
  }
  const int rc = std::system(
      fmt::format("{} reward --kind math < {} > {} 2>/dev/null", cli, dir.file("in.jsonl"), dir.file("out.jsonl"))
          .c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 3);
  std::ifstream out(dir.file("out.jsonl"));
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), kMath.size() + 1);
  for (std::size_t i = 0; i < kMath.size(); ++i) {
    EXPECT_EQ(lines[i]["reason"], rewardReasonName(kMath[i].reason)) << "case " << i;
    EXPECT_EQ(lines[i]["reward"].get<double>(), kMath[i].reason == C ? 1.0 : 0.0) << "case " << i;
  }
  EXPECT_TRUE(lines.back().contains("error"));
}

}  // namespace
