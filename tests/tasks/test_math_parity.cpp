// The `math` reward against Hugging Face's math-verify (tests/tasks/math_verify_reference.py, as
// verl grades with it) on thousands of answer/gold pairs this test generates in every form a
// final answer takes: integers large and small with thousands separators, fractions (braced and
// brace-less), decimals, percents, radicals, multiples of pi, units and degrees, sets in any
// order, tuples and intervals, matrices, equations, polynomials, text, and the answer lines of
// the common harnesses. Each pair is made right or wrong on purpose, so the test knows the truth:
// astraflow must grade every pair by it (no reward for a wrong answer, none withheld from a right
// one), and must agree with math-verify on every pair but those of the deliberate differences
// listed in docs/tasks.md.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "astraflow/tasks/reward.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

struct Pair {
  std::string category;
  std::string response;
  std::string reference;
  bool truth;
};

// The categories where astraflow grades by the truth and math-verify does not (docs/tasks.md,
// "Where it differs from math-verify").
const std::map<std::string, std::string> kDeliberate = {
    {"thin_space_thousands", "math-verify reads 3\\,000 as 3*0"},
    {"set_for_tuple", "math-verify takes a set {1, 2} for the interval (1, 2)"},
};

class Generator {
 public:
  explicit Generator(unsigned seed) : rng_(seed) {}
  std::vector<Pair> pairs;

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  long long big() { return std::uniform_int_distribution<long long>(1'000'000, 999'999'999'999LL)(rng_); }

  // The answer in a response of one of the common shapes.
  std::string respond(const std::string& answer, bool plain_number) {
    static const std::vector<std::string> shapes = {
        "Adding the parts gives the total.\n\\boxed{{{}}}",
        "We get $\\boxed{{{}}}$.",
        "Final Answer: The final answer is ${}$. I hope it is correct.",
        "**Answer:** ${}$",
        "So the answer is ${}$.",
        "Step 1: 3 + 4 = 7.\nStep 2: done.\nAnswer: ${}$",
    };
    const int n = static_cast<int>(shapes.size()) + (plain_number ? 2 : 0);
    const int k = uniform(0, n - 1);
    if (k == static_cast<int>(shapes.size())) return fmt::format("Working it out: 12 - 5 = 7, so it is {}.", answer);
    if (k == static_cast<int>(shapes.size()) + 1) return fmt::format("#### {}", answer);
    return fmt::format(fmt::runtime(shapes[static_cast<std::size_t>(k)]), answer);
  }
  void add(const std::string& category, const std::string& answer, const std::string& gold, bool truth,
           bool plain_number = false) {
    pairs.push_back({category, respond(answer, plain_number), gold, truth});
  }

  static std::string grouped(long long n, const std::string& sep) {
    std::string digits = std::to_string(n), out;
    for (std::size_t k = 0; k < digits.size(); ++k) {
      if (k > 0 && (digits.size() - k) % 3 == 0) out += sep;
      out += digits[k];
    }
    return out;
  }

  void integers() {
    for (int i = 0; i < 60; ++i) {
      const long long n = i % 2 ? big() : uniform(-999, 999);
      const std::string g = std::to_string(n);
      add("integer", g, g, true, true);
      add("integer", std::to_string(n + 1), g, false, true);
      add("integer", std::to_string(n - 1), g, false, true);
      add("integer", std::to_string(n * 10), g, false, true);
      if (n >= 1000) {
        add("thousands", grouped(n, ","), g, true);
        add("thousands", grouped(n, "{,}"), g, true);
        add("thousands", grouped(n + 1, "{,}"), g, false);
        add("thin_space_thousands", grouped(n, "\\,"), g, true);
        add("thin_space_thousands", grouped(n + 1, "\\,"), g, false);
      }
    }
  }

  void fractions() {
    for (int i = 0; i < 80; ++i) {
      int p = uniform(1, 40), q = uniform(2, 40);
      const int d = std::gcd(p, q);
      p /= d, q /= d;
      if (q == 1) continue;
      const std::string g = fmt::format("\\frac{{{}}}{{{}}}", p, q);
      const int m = uniform(2, 5);
      add("fraction", fmt::format("\\dfrac{{{}}}{{{}}}", p * m, q * m), g, true);
      add("fraction", fmt::format("{}/{}", p, q), g, true);
      add("fraction", fmt::format("-\\frac{{{}}}{{{}}}", p, q), fmt::format("-{}/{}", p, q), true);
      add("fraction", fmt::format("\\frac{{{}}}{{{}}}", p + 1, q), g, false);
      add("fraction", fmt::format("\\frac{{{}}}{{{}}}", q, p), g, p == q);
      add("fraction", fmt::format("\\frac{{{}}}{{{}}}", -p, q), g, false);
      if (p < 10 && q < 10) {
        add("fraction", fmt::format("\\frac{}{}", p, q), g, true);  // brace-less: \frac94
        add("fraction", fmt::format("\\tfrac{}{}", p + 1, q), g, false);
      }
      if (q == 2 || q == 4 || q == 5 || q == 8 || q == 10 || q == 20 || q == 25) {
        const double v = static_cast<double>(p) / q;
        add("decimal", fmt::format("{}", v), g, true);
        add("decimal", fmt::format("{:.6f}", v), g, true);
        add("decimal", fmt::format("{}", v + 0.01), g, false);
      }
      add("decimal", fmt::format("{:.6f}", static_cast<double>(p) / q), g, true);  // rounded to 6 places
      add("decimal", fmt::format("{:.2f}", static_cast<double>(p) / q + 0.1), g, false);
    }
  }

  void percents() {
    for (int i = 0; i < 40; ++i) {
      const int p = uniform(1, 99);
      add("percent", fmt::format("{}\\%", p), fmt::format("{}", p / 100.0), true);
      add("percent", fmt::format("{}\\%", p), fmt::format("{}\\%", p), true);
      add("percent", fmt::format("{}\\%", p + 1), fmt::format("{}", p / 100.0), false);
      if (p % 10 != 0)  // 0.5% is not 0.5 (an integer p% is also p: math-verify's rule)
        add("percent", fmt::format("{}\\%", p / 10.0), fmt::format("{}", p / 10.0), false);
      add("percent", fmt::format("{}", p / 100.0), fmt::format("{}\\%", p), true);
    }
  }

  void radicals() {
    for (const int b : {2, 3, 5, 6, 7, 10, 11}) {
      for (int a = 2; a <= 7; ++a) {
        const std::string g = fmt::format("{}\\sqrt{{{}}}", a, b);
        if (b < 10) add("radical", fmt::format("{}\\sqrt{}", a, b), g, true);  // brace-less: 2\sqrt3
        add("radical", fmt::format("\\sqrt{{{}}}", a * a * b), g, true);
        add("radical", fmt::format("\\frac{{{}\\sqrt{{{}}}}}{{2}}", 2 * a, b), g, true);
        add("radical", fmt::format("{}\\sqrt{{{}}}", a + 1, b), g, false);
        add("radical", fmt::format("{}\\sqrt{{{}}}", a, b + 1), g, false);
        add("radical", fmt::format("\\sqrt{{{}}}", a * b), g, false);
      }
      add("radical", fmt::format("\\frac{{1}}{{\\sqrt{{{}}}}}", b), fmt::format("\\frac{{\\sqrt{{{}}}}}{{{}}}", b, b),
          true);
    }
  }

  void pis() {
    for (int i = 0; i < 20; ++i) {
      const int k = uniform(1, 9), m = uniform(2, 9);
      const std::string g = fmt::format("\\frac{{{}\\pi}}{{{}}}", k, m);
      add("pi", fmt::format("\\frac{{{}}}{{{}}}\\pi", k, m), g, true);
      add("pi", fmt::format("{}\\pi/{}", k, m), g, true);
      add("pi", fmt::format("\\frac{{{}\\pi}}{{{}}}", k + 1, m), g, false);
      add("pi", fmt::format("\\frac{{{}}}{{{}}}", k, m), g, false);
    }
  }

  void units() {
    for (int i = 0; i < 30; ++i) {
      const int n = uniform(1, 500);
      const std::string g = std::to_string(n);
      const std::vector<std::string> forms = {
          "{} \\text{{ cm}}",    "{}\\text{{ dollars}}", "{}^\\circ", "{}^{{\\circ}}", "\\${}",
          "{} \\mbox{{ units}}", "{}\\text{{ cm}}^2"};
      const std::string& form = forms[static_cast<std::size_t>(uniform(0, static_cast<int>(forms.size()) - 1))];
      add("units", fmt::format(fmt::runtime(form), n), g, true);
      add("units", fmt::format(fmt::runtime(form), n + 1), g, false);
    }
  }

  std::vector<int> distinct(int count) {
    std::set<int> s;
    while (static_cast<int>(s.size()) < count) s.insert(uniform(-20, 40));
    std::vector<int> v(s.begin(), s.end());
    std::shuffle(v.begin(), v.end(), rng_);
    return v;
  }
  static std::string join(const std::vector<int>& v, const char* sep = ", ") {
    std::string out;
    for (std::size_t k = 0; k < v.size(); ++k) out += (k ? sep : "") + std::to_string(v[k]);
    return out;
  }

  void sets() {
    for (int i = 0; i < 40; ++i) {
      std::vector<int> v = distinct(uniform(2, 5));
      const std::string g = "\\{" + join(v) + "\\}";
      std::vector<int> w = v;
      std::shuffle(w.begin(), w.end(), rng_);
      add("set", "\\{" + join(w) + "\\}", g, true);
      add("set", join(w), g, true);
      add("set", join(w), join(v), true);
      std::vector<int> shorter(w.begin(), w.end() - 1);
      add("set", "\\{" + join(shorter) + "\\}", g, false);
      w[0] += 100;
      add("set", "\\{" + join(w) + "\\}", g, false);
    }
  }

  void tuples() {
    for (int i = 0; i < 40; ++i) {
      const std::vector<int> v = distinct(2);
      const int a = std::min(v[0], v[1]), b = std::max(v[0], v[1]);
      add("interval", fmt::format("[{}, {})", a, b), fmt::format("[{},{})", a, b), true);
      add("interval", fmt::format("[{}, {}]", a, b), fmt::format("[{},{})", a, b), false);
      add("interval", fmt::format("({}, {}]", a, b), fmt::format("[{},{})", a, b), false);
      add("interval", fmt::format("(-\\infty, {}) \\cup ({}, \\infty)", a, b),
          fmt::format("({},\\infty)\\cup(-\\infty,{})", b, a), true);
      add("interval", fmt::format("(-\\infty, {}) \\cup ({}, \\infty)", a, b + 1),
          fmt::format("(-\\infty,{})\\cup({},\\infty)", a, b), false);
      const std::vector<int> t = distinct(3);
      add("tuple", fmt::format("({}, {}, {})", t[0], t[1], t[2]), fmt::format("({},{},{})", t[0], t[1], t[2]), true);
      add("tuple", fmt::format("({}, {}, {})", t[1], t[0], t[2]), fmt::format("({},{},{})", t[0], t[1], t[2]), false);
      add("tuple", fmt::format("\\left( {}, \\frac{{{}}}{{2}} \\right)", a, 2 * b), fmt::format("({},{})", a, b), true);
      add("set_for_tuple", fmt::format("\\{{{}, {}\\}}", a, b), fmt::format("({},{})", a, b), false);
    }
  }

  void matrices() {
    for (int i = 0; i < 30; ++i) {
      const int r = uniform(1, 3), c = uniform(1, 3);
      std::vector<int> cells(static_cast<std::size_t>(r * c));
      for (auto& x : cells) x = uniform(-9, 9);
      auto write = [&](const char* env, const char* row_break, const std::vector<int>& m) {
        std::string s = fmt::format("\\begin{{{}}}", env);
        for (int i2 = 0; i2 < r; ++i2) {
          for (int j = 0; j < c; ++j) s += (j ? " & " : " ") + std::to_string(m[static_cast<std::size_t>(i2 * c + j)]);
          if (i2 + 1 < r) s += row_break;
        }
        return s + fmt::format(" \\end{{{}}}", env);
      };
      const std::string g = write("pmatrix", " \\\\ ", cells);
      add("matrix", write("pmatrix", "\\\\", cells), g, true);
      add("matrix", write("bmatrix", " \\\\ ", cells), g, true);
      std::vector<int> other = cells;
      other[static_cast<std::size_t>(uniform(0, r * c - 1))] += 1;
      add("matrix", write("pmatrix", " \\\\ ", other), g, false);
    }
  }

  void equations() {
    for (int i = 0; i < 40; ++i) {
      const int a = uniform(2, 9), b = uniform(1, 9), k = uniform(-50, 50);
      add("equation", fmt::format("x = {}", k), std::to_string(k), true);
      add("equation", fmt::format("x = {}", k + 1), std::to_string(k), false);
      add("equation", fmt::format("y = {} + {}x", b, a), fmt::format("y={}x+{}", a, b), true);
      add("equation", fmt::format("y = {} - {}x", b, a), fmt::format("y={}x+{}", a, b), false);
      add("polynomial", fmt::format("(x+{})(x+{})", a, b), fmt::format("x^2+{}x+{}", a + b, a * b), true);
      add("polynomial", fmt::format("(x+{})(x-{})", a, b), fmt::format("x^2+{}x+{}", a + b, a * b), false);
      add("polynomial", fmt::format("{}x^2 + {}", a, b), fmt::format("{}+{}x^{{2}}", b, a), true);
      add("polynomial", fmt::format("\\frac{{x^2-{}}}{{x-{}}}", b * b, b), fmt::format("x+{}", b), true);
    }
  }

  void texts() {
    for (const char* w : {"Yes", "No", "odd", "even", "Monday", "Tuesday"}) {
      add("text", fmt::format("\\text{{{}}}", w), w, true);
      add("text", w, fmt::format("\\text{{{}}}", w), true);
    }
    add("text", "\\text{Yes}", "No", false);
    add("text", "\\text{odd}", "even", false);
    add("text", "\\text{Monday}", "\\text{Tuesday}", false);
  }

 private:
  std::mt19937 rng_;
};

std::vector<Pair> generate() {
  Generator g(20261207);
  g.integers();
  g.fractions();
  g.percents();
  g.radicals();
  g.pis();
  g.units();
  g.sets();
  g.tuples();
  g.matrices();
  g.equations();
  g.texts();
  return g.pairs;
}

}  // namespace

TEST(MathParity, GradesByTheTruthAndAgreesWithMathVerify) {
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_MATH_VERIFY_REFERENCE");
  ASSERT_TRUE(py && script) << "run under ctest (ASTRAFLOW_PYTHON, ASTRAFLOW_MATH_VERIFY_REFERENCE)";
  const std::vector<Pair> pairs = generate();
  ASSERT_GE(pairs.size(), 2000u);
  test::TempDir dir;
  {
    std::ofstream in(dir.file("in.jsonl"));
    for (const Pair& p : pairs)
      in << nlohmann::json{{"response", p.response}, {"reference", p.reference}}.dump() << "\n";
  }
  ASSERT_EQ(std::system(fmt::format("{} {} {} {}", py, script, dir.file("in.jsonl"), dir.file("out.jsonl")).c_str()),
            0);
  std::ifstream out(dir.file("out.jsonl"));
  std::map<std::string, int> disagreements, count;
  int wrong_by_truth = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const Pair& p : pairs) {
    std::string line;
    ASSERT_TRUE(std::getline(out, line)) << "math-verify answered fewer lines than it was given";
    const bool reference = nlohmann::json::parse(line)["correct"].get<bool>();
    const RewardResult r = mathReward(p.response, p.reference);
    const bool ours = r.reward == 1.0;
    ++count[p.category];
    if (ours != p.truth) {
      ++wrong_by_truth;
      ADD_FAILURE() << "[" << p.category << "] " << p.response << "  vs  " << p.reference << ": graded " << ours
                    << " (answer \"" << r.answer << "\"), truth " << p.truth;
    }
    if (ours != reference) {
      ++disagreements[p.category];
      if (!kDeliberate.contains(p.category))
        ADD_FAILURE() << "[" << p.category << "] " << p.response << "  vs  " << p.reference << ": astraflow " << ours
                      << ", math-verify " << reference;
    }
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(wrong_by_truth, 0);
  std::string summary;
  for (const auto& [category, n] : count)
    summary += fmt::format(" {}={}/{}", category, disagreements.contains(category) ? disagreements[category] : 0, n);
  std::cout << fmt::format("{} pairs, {:.1f} us a pair; disagreements with math-verify by category:{}\n", pairs.size(),
                           us / static_cast<double>(pairs.size()), summary);
}
