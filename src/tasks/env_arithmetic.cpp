// ArithmeticEnvironment ("arithmetic"): one-turn integer arithmetic with an exact-match reward.
//
// Prompt  "12+34=<answer>"   (plain text; the engine adds <bos> itself)
// Action  "46</answer>"      (the result, then the stop tag)
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tasks/builtin_environments.hpp"
#include "tasks/deterministic_hash.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

constexpr std::string_view kStopTag = "</answer>";
constexpr int kMaxDigits = 6;  // 6x6-digit products still fit in int64
constexpr std::uint64_t kProblemSalt = 0xA5B1C0DE2024ULL;
constexpr std::uint64_t kContentSalt = 0x5EED0F5A11A7ULL;
// 1 problem in kHeldOutModulus (by content) is held out, and so is 1 id in kHeldOutModulus.
constexpr std::uint64_t kHeldOutModulus = 10;
// Rejection sampling of a held-out problem needs ~kHeldOutModulus draws; this bound is only
// reached if one side of the split had no problem at all, which the tests rule out.
constexpr int kMaxDraws = 1 << 16;

struct Problem {
  std::int64_t a = 0;
  char op = '+';
  std::int64_t b = 0;
  int difficulty = 0;  // digit count of the longer operand
};

std::int64_t evaluate(const Problem& p) {
  switch (p.op) {
    case '+': return p.a + p.b;
    case '-': return p.a - p.b;
    default: return p.a * p.b;
  }
}

// The split is a function of the problem's content, so no two ids can put the same problem
// on both sides.
bool isHeldOutContent(const Problem& p) {
  std::uint64_t h = detail::hashCombine(kContentSalt, static_cast<std::uint64_t>(p.a));
  h = detail::hashCombine(h, static_cast<unsigned char>(p.op));
  h = detail::hashCombine(h, static_cast<std::uint64_t>(p.b));
  return h % kHeldOutModulus == 0;
}

class ArithmeticEnvironment final : public Environment {
 public:
  explicit ArithmeticEnvironment(const EnvironmentOptions& options) : digits_(options.digits) {
    if (digits_ < 1 || digits_ > kMaxDigits) {
      throw std::invalid_argument(
          fmt::format("environment.digits: {} is outside the allowed range [1, {}]", digits_, kMaxDigits));
    }
    for (char c : options.operators) {
      if (c != '+' && c != '-' && c != '*') {
        throw std::invalid_argument(fmt::format(
            "environment.operators: '{}' contains '{}'; allowed operators are '+', '-' and '*'", options.operators, c));
      }
      if (operators_.find(c) == std::string::npos) operators_ += c;
    }
    if (operators_.empty()) {
      throw std::invalid_argument(
          "environment.operators: empty; give one or more of the allowed operators '+', '-' and '*'");
    }
  }

  std::string name() const override { return "arithmetic"; }

  std::string reset(std::uint64_t problem_id) override {
    problem_ = generate(problem_id);
    answer_ = std::to_string(evaluate(problem_));
    started_ = true;
    done_ = false;
    return fmt::format("{}{}{}=<answer>", problem_.a, problem_.op, problem_.b);
  }

  StepResult step(std::string_view action) override {
    if (!started_) throw std::logic_error("arithmetic environment: step() before reset()");
    if (done_) throw std::logic_error("arithmetic environment: step() after the episode ended");
    done_ = true;
    StepResult result;
    result.done = true;
    const auto stop = action.find(kStopTag);
    if (stop != std::string_view::npos && detail::trimSpaces(action.substr(0, stop)) == answer_) result.reward = 1.0;
    return result;
  }

  std::vector<std::string> referenceActions() const override {
    if (!started_) return {};
    return {answer_ + std::string(kStopTag)};
  }
  std::vector<std::string> stopStrings() const override { return {std::string(kStopTag)}; }
  int maxTurns() const override { return 1; }

  // Ids ≡ 0 (mod 10) are held out, the others train; generate() draws each id's problem from
  // its side of the content split, so both maps are O(1) and exact.
  std::uint64_t trainingId(std::uint64_t k) const override {
    return (k / (kHeldOutModulus - 1)) * kHeldOutModulus + k % (kHeldOutModulus - 1) + 1;
  }
  std::uint64_t heldOutId(std::uint64_t k) const override { return k * kHeldOutModulus; }

  std::map<std::string, std::string> metadata() const override {
    if (!started_) return {};
    return {{"difficulty", std::to_string(problem_.difficulty)}, {"operator", std::string(1, problem_.op)}};
  }

 private:
  // Draws (op, a, b) from the id's stream until the problem lies on the id's side of the split.
  Problem generate(std::uint64_t problem_id) const {
    const bool held_out = problem_id % kHeldOutModulus == 0;
    detail::MixStream stream(detail::hashCombine(kProblemSalt, problem_id));
    for (int draw = 0; draw < kMaxDraws; ++draw) {
      Problem p;
      p.op = operators_[stream.below(operators_.size())];
      int digits_a = 0;
      int digits_b = 0;
      p.a = operand(stream, digits_a);
      p.b = operand(stream, digits_b);
      p.difficulty = std::max(digits_a, digits_b);
      if (isHeldOutContent(p) == held_out) return p;
    }
    throw std::runtime_error(fmt::format("arithmetic environment: no {} problem for operators '{}' and digits {}",
                                         held_out ? "held-out" : "training", operators_, digits_));
  }

  // A number of 1..digits_ digits: the digit count is uniform, then the value within it, so
  // short operands are as common as long ones.
  std::int64_t operand(detail::MixStream& stream, int& digit_count) const {
    static constexpr std::array<std::int64_t, kMaxDigits + 1> kPow10 = {1, 10, 100, 1000, 10000, 100000, 1000000};
    digit_count = 1 + static_cast<int>(stream.below(static_cast<std::uint64_t>(digits_)));
    const std::int64_t low = digit_count == 1 ? 0 : kPow10[digit_count - 1];
    const std::int64_t high = kPow10[digit_count];  // exclusive
    return low + static_cast<std::int64_t>(stream.below(static_cast<std::uint64_t>(high - low)));
  }

  int digits_;
  std::string operators_;  // distinct, in the order given
  Problem problem_;
  std::string answer_;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace

namespace detail {
std::unique_ptr<Environment> makeArithmeticEnvironment(const EnvironmentOptions& options) {
  return std::make_unique<ArithmeticEnvironment>(options);
}
}  // namespace detail

}  // namespace astraflow
