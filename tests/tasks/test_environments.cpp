// The built-in environments and their registry: rewards, problem generation, the held-out
// split and option validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "astraflow/tasks/environment.hpp"

namespace astraflow {
namespace {

EnvironmentOptions arithmeticOptions(const std::string& operators = "+-", int digits = 2) {
  EnvironmentOptions options;
  options.name = "arithmetic";
  options.operators = operators;
  options.digits = digits;
  return options;
}

EnvironmentOptions searchOptions(int corpus_size = 64, int max_turns = 4, std::uint64_t seed = 7) {
  EnvironmentOptions options;
  options.name = "search";
  options.corpus_size = corpus_size;
  options.max_turns = max_turns;
  options.corpus_seed = seed;
  return options;
}

// "12-345=<answer>" → {12, '-', 345}
struct ParsedPrompt {
  long long a = 0;
  char op = 0;
  long long b = 0;
};

ParsedPrompt parseArithmeticPrompt(const std::string& prompt) {
  const std::string suffix = "=<answer>";
  EXPECT_TRUE(prompt.ends_with(suffix)) << prompt;
  const auto op_pos = prompt.find_first_not_of("0123456789");
  ParsedPrompt p;
  p.a = std::stoll(prompt.substr(0, op_pos));
  p.op = prompt[op_pos];
  p.b = std::stoll(prompt.substr(op_pos + 1, prompt.size() - suffix.size() - op_pos - 1));
  EXPECT_EQ(std::to_string(p.a) + p.op + std::to_string(p.b) + suffix, prompt);
  return p;
}

long long evaluate(const ParsedPrompt& p) {
  switch (p.op) {
    case '+': return p.a + p.b;
    case '-': return p.a - p.b;
    case '*': return p.a * p.b;
  }
  ADD_FAILURE() << "operator " << p.op;
  return 0;
}

template <typename Fn>
void expectInvalidArgumentNaming(Fn&& fn, const std::vector<std::string>& words) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

// ---- arithmetic ------------------------------------------------------------------------

TEST(ArithmeticEnvironment, ReferenceActionEarnsReward) {
  auto env = makeEnvironment(arithmeticOptions());
  EXPECT_EQ(env->name(), "arithmetic");
  EXPECT_EQ(env->maxTurns(), 1);
  EXPECT_EQ(env->stopStrings(), std::vector<std::string>{"</answer>"});
  for (std::uint64_t id = 0; id < 200; ++id) {
    const auto prompt = env->reset(id);
    const auto reference = env->referenceActions();
    ASSERT_EQ(reference.size(), 1u);
    EXPECT_EQ(reference[0], std::to_string(evaluate(parseArithmeticPrompt(prompt))) + "</answer>");
    const auto r = env->step(reference[0]);
    EXPECT_EQ(r.reward, 1.0) << prompt << reference[0];
    EXPECT_TRUE(r.done);
    EXPECT_TRUE(r.observation.empty());
  }
}

TEST(ArithmeticEnvironment, SpacesAroundTheAnswerAreIgnored) {
  auto env = makeEnvironment(arithmeticOptions());
  const auto result = std::to_string(evaluate(parseArithmeticPrompt(env->reset(3))));
  EXPECT_EQ(env->step(" " + result + " </answer>").reward, 1.0);
}

TEST(ArithmeticEnvironment, WrongOrMalformedAnswerEarnsNothing) {
  auto env = makeEnvironment(arithmeticOptions());
  for (std::uint64_t id = 0; id < 50; ++id) {
    const auto result = evaluate(parseArithmeticPrompt(env->reset(id)));
    const auto wrong = env->step(std::to_string(result + 1) + "</answer>");
    EXPECT_EQ(wrong.reward, 0.0);
    EXPECT_TRUE(wrong.done);

    env->reset(id);
    const auto no_stop_tag = env->step(std::to_string(result));  // right number, no </answer>
    EXPECT_EQ(no_stop_tag.reward, 0.0);
    EXPECT_TRUE(no_stop_tag.done);

    env->reset(id);
    EXPECT_EQ(env->step("x" + std::to_string(result) + "</answer>").reward, 0.0);
    env->reset(id);
    EXPECT_EQ(env->step("</answer>").reward, 0.0);
  }
}

TEST(ArithmeticEnvironment, AllOperatorsProduceCorrectResults) {
  auto env = makeEnvironment(arithmeticOptions("+-*", 3));
  std::map<char, int> seen;
  bool negative = false;
  for (std::uint64_t id = 0; id < 1000; ++id) {
    const auto p = parseArithmeticPrompt(env->reset(id));
    const auto expected = evaluate(p);
    ++seen[p.op];
    negative = negative || expected < 0;
    EXPECT_GE(p.a, 0);
    EXPECT_LT(p.a, 1000);
    EXPECT_GE(p.b, 0);
    EXPECT_LT(p.b, 1000);
    const auto meta = env->metadata();
    EXPECT_EQ(meta.at("operator"), std::string(1, p.op));
    const auto digits = std::max(std::to_string(p.a).size(), std::to_string(p.b).size());
    EXPECT_EQ(meta.at("difficulty"), std::to_string(digits));
    EXPECT_EQ(env->step(std::to_string(expected) + "</answer>").reward, 1.0);
  }
  EXPECT_GT(seen['+'], 200);
  EXPECT_GT(seen['-'], 200);
  EXPECT_GT(seen['*'], 200);
  EXPECT_TRUE(negative);
}

TEST(ArithmeticEnvironment, OnlyTheConfiguredOperatorsAppear) {
  auto env = makeEnvironment(arithmeticOptions("*", 1));
  for (std::uint64_t id = 0; id < 200; ++id) {
    const auto p = parseArithmeticPrompt(env->reset(id));
    EXPECT_EQ(p.op, '*');
    EXPECT_LT(p.a, 10);
    EXPECT_LT(p.b, 10);
  }
}

TEST(ArithmeticEnvironment, SameIdSameProblem) {
  auto first = makeEnvironment(arithmeticOptions("+-*", 4));
  auto second = makeEnvironment(arithmeticOptions("+-*", 4));
  std::set<std::string> distinct;
  for (std::uint64_t id = 0; id < 100; ++id) {
    const auto prompt = first->reset(id);
    EXPECT_EQ(second->reset(id), prompt);
    EXPECT_EQ(first->reset(id), prompt);
    distinct.insert(prompt);
  }
  EXPECT_GT(distinct.size(), 90u);
}

TEST(ArithmeticEnvironment, ProblemsArePinnedAcrossPlatforms) {
  // The generator is part of the data: changing it silently changes every held-out set.
  auto env = makeEnvironment(arithmeticOptions("+-*", 3));
  EXPECT_EQ(env->reset(0), "38*5=<answer>");
  EXPECT_EQ(env->reset(1), "40-54=<answer>");
  EXPECT_EQ(env->reset(12345), "1*1=<answer>");
}

TEST(ArithmeticEnvironment, HeldOutAndTrainingAreDisjointByContent) {
  for (const auto& [operators, digits] :
       std::vector<std::pair<std::string, int>>{{"+-*", 2}, {"+", 1}, {"-", 1}, {"*", 1}}) {
    auto env = makeEnvironment(arithmeticOptions(operators, digits));
    std::set<std::string> training;
    std::set<std::string> held_out;
    std::set<std::uint64_t> ids;
    for (std::uint64_t k = 0; k < 2000; ++k) {
      training.insert(env->reset(env->trainingId(k)));
      held_out.insert(env->reset(env->heldOutId(k)));
      ids.insert(env->trainingId(k));
      ids.insert(env->heldOutId(k));
    }
    EXPECT_EQ(ids.size(), 4000u) << "ids repeat";
    EXPECT_FALSE(training.empty());
    EXPECT_GE(held_out.size(), 2u) << operators << digits;
    for (const auto& prompt : held_out) EXPECT_EQ(training.count(prompt), 0u) << prompt << " is on both sides";
    // Roughly 1 in 10 distinct problems is held out.
    if (digits == 1) {
      EXPECT_LT(held_out.size(), training.size() / 3) << operators;
    }
  }
}

TEST(ArithmeticEnvironment, InvalidOptionsNameTheirKey) {
  expectInvalidArgumentNaming([] { makeEnvironment(arithmeticOptions("+-", 0)); }, {"environment.digits"});
  expectInvalidArgumentNaming([] { makeEnvironment(arithmeticOptions("+-", 7)); }, {"environment.digits"});
  expectInvalidArgumentNaming([] { makeEnvironment(arithmeticOptions("+/", 2)); },
                              {"environment.operators", "'+'", "'-'", "'*'"});
  expectInvalidArgumentNaming([] { makeEnvironment(arithmeticOptions("", 2)); }, {"environment.operators"});
  EXPECT_NO_THROW(makeEnvironment(arithmeticOptions("*-+", 6)));
}

TEST(ArithmeticEnvironment, StepOutsideAnEpisodeIsAnError) {
  auto env = makeEnvironment(arithmeticOptions());
  EXPECT_THROW(env->step("1</answer>"), std::logic_error);
  env->reset(1);
  env->step("1</answer>");
  EXPECT_THROW(env->step("1</answer>"), std::logic_error);
}

// ---- search ----------------------------------------------------------------------------

std::string keyOf(const std::string& prompt) {
  EXPECT_TRUE(prompt.starts_with("value of ") && prompt.ends_with("?")) << prompt;
  return prompt.substr(9, prompt.size() - 10);
}

TEST(SearchEnvironment, ReferenceActionsSolveTheEpisode) {
  auto env = makeEnvironment(searchOptions());
  EXPECT_EQ(env->name(), "search");
  EXPECT_EQ(env->maxTurns(), 4);
  EXPECT_EQ(env->stopStrings(), (std::vector<std::string>{"</search>", "</answer>"}));
  for (std::uint64_t id = 0; id < 100; ++id) {
    const auto key = keyOf(env->reset(id));
    ASSERT_EQ(key.size(), 3u);
    EXPECT_TRUE(std::all_of(key.begin(), key.end(), [](char c) { return c >= 'a' && c <= 'z'; })) << key;
    const auto reference = env->referenceActions();
    ASSERT_EQ(reference.size(), 2u);
    EXPECT_EQ(reference[0], "<search>" + key + "</search>");
    ASSERT_TRUE(reference[1].starts_with("<answer>") && reference[1].ends_with("</answer>"));
    const auto value = reference[1].substr(8, reference[1].size() - 17);
    ASSERT_GE(value.size(), 1u);
    ASSERT_LE(value.size(), 3u);
    EXPECT_EQ(std::to_string(std::stoi(value)), value);

    const auto search = env->step(reference[0]);
    EXPECT_FALSE(search.done);
    EXPECT_EQ(search.reward, 0.0);
    EXPECT_EQ(search.observation, "<information>" + key + "=" + value + "</information>");
    const auto answer = env->step(reference[1]);
    EXPECT_TRUE(answer.done);
    EXPECT_EQ(answer.reward, 1.0);
    EXPECT_EQ(env->metadata().at("key"), key);
    EXPECT_EQ(env->metadata().at("turn_limit"), "4");
  }
}

TEST(SearchEnvironment, AnsweringWithoutSearchingCountsToo) {
  auto env = makeEnvironment(searchOptions());
  env->reset(11);
  const auto r = env->step(env->referenceActions()[1]);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.reward, 1.0);
}

TEST(SearchEnvironment, WrongAnswerEarnsNothing) {
  auto env = makeEnvironment(searchOptions());
  for (std::uint64_t id = 0; id < 50; ++id) {
    env->reset(id);
    const auto reference = env->referenceActions()[1];
    const int value = std::stoi(reference.substr(8));
    const auto r = env->step("<answer>" + std::to_string((value + 1) % 1000) + "</answer>");
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.reward, 0.0);
  }
}

TEST(SearchEnvironment, RunningOutOfTurnsEndsWithoutReward) {
  auto env = makeEnvironment(searchOptions(64, 3));
  env->reset(5);
  const auto search = env->referenceActions()[0];
  const auto first = env->step(search);
  EXPECT_FALSE(first.done);
  const auto second = env->step("thinking");
  EXPECT_FALSE(second.done);
  EXPECT_EQ(second.observation, "<information>none</information>");
  const auto third = env->step(search);
  EXPECT_TRUE(third.done);
  EXPECT_EQ(third.reward, 0.0);
  EXPECT_THROW(env->step(env->referenceActions()[1]), std::logic_error);

  // The answer on the last allowed turn still counts.
  env->reset(5);
  env->step(search);
  env->step(search);
  const auto last = env->step(env->referenceActions()[1]);
  EXPECT_TRUE(last.done);
  EXPECT_EQ(last.reward, 1.0);
}

TEST(SearchEnvironment, UnknownKeyAndUnrecognisedTurnsGetNone) {
  auto env = makeEnvironment(searchOptions(16));
  std::set<std::string> corpus;
  for (std::uint64_t k = 0; k < 16; ++k) {
    corpus.insert(keyOf(env->reset(env->trainingId(k))));
    corpus.insert(keyOf(env->reset(env->heldOutId(k))));
  }
  EXPECT_EQ(corpus.size(), 16u);  // the two id sequences together cover the corpus
  std::string missing = "aaa";
  while (corpus.count(missing) != 0) ++missing[2];
  env->reset(1);
  for (const std::string& turn : {"<search>" + missing + "</search>", std::string("<search></search>"),
                                  std::string("hello"), std::string("<answer>12"), std::string("12</answer>")}) {
    const auto r = env->step(turn);
    EXPECT_FALSE(r.done) << turn;
    EXPECT_EQ(r.observation, "<information>none</information>") << turn;
    env->reset(1);
  }
}

TEST(SearchEnvironment, HeldOutAndTrainingAreDisjointByKey) {
  for (int corpus_size : {4, 5, 6, 8, 64, 10000}) {
    for (std::uint64_t seed : {1u, 7u, 99u}) {
      auto env = makeEnvironment(searchOptions(corpus_size, 4, seed));
      std::set<std::string> training;
      std::set<std::string> held_out;
      for (std::uint64_t k = 0; k < 2000; ++k) {
        training.insert(keyOf(env->reset(env->trainingId(k))));
        held_out.insert(keyOf(env->reset(env->heldOutId(k))));
      }
      EXPECT_FALSE(training.empty());
      EXPECT_FALSE(held_out.empty()) << corpus_size << " " << seed;
      for (const auto& key : held_out) EXPECT_EQ(training.count(key), 0u) << key << " is on both sides";
      if (corpus_size == 64) {
        EXPECT_EQ(training.size() + held_out.size(), 64u);  // every key is reached
        EXPECT_GT(held_out.size(), 3u);
        EXPECT_LT(held_out.size(), 26u);
      }
    }
  }
}

TEST(SearchEnvironment, CorpusIsAFunctionOfTheSeed) {
  auto a = makeEnvironment(searchOptions(64, 4, 7));
  auto b = makeEnvironment(searchOptions(64, 4, 7));
  auto c = makeEnvironment(searchOptions(64, 4, 8));
  int differ = 0;
  for (std::uint64_t id = 0; id < 64; ++id) {
    const auto prompt = a->reset(id);
    EXPECT_EQ(b->reset(id), prompt);
    EXPECT_EQ(a->referenceActions(), b->referenceActions());
    differ += c->reset(id) != prompt;
  }
  EXPECT_GT(differ, 32);
  a->reset(0);
  EXPECT_EQ(a->referenceActions(), (std::vector<std::string>{"<search>umh</search>", "<answer>606</answer>"}));
}

TEST(SearchEnvironment, InvalidOptionsNameTheirKey) {
  expectInvalidArgumentNaming([] { makeEnvironment(searchOptions(3)); }, {"environment.corpus_size"});
  expectInvalidArgumentNaming([] { makeEnvironment(searchOptions(10001)); }, {"environment.corpus_size"});
  expectInvalidArgumentNaming([] { makeEnvironment(searchOptions(64, 0)); }, {"environment.max_turns"});
  expectInvalidArgumentNaming([] { makeEnvironment(searchOptions(64, 17)); }, {"environment.max_turns"});
  EXPECT_NO_THROW(makeEnvironment(searchOptions(4, 1)));
  EXPECT_NO_THROW(makeEnvironment(searchOptions(10000, 16)));
}

// ---- registry --------------------------------------------------------------------------

TEST(EnvironmentRegistry, ListsAndBuildsTheBuiltins) {
  const auto names = environmentNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "arithmetic"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "search"), names.end());
  for (const char* chat : {"dataset", "code_interpreter", "doc_search", "openenv"})
    EXPECT_NE(std::find(names.begin(), names.end(), chat), names.end()) << chat;
  for (const auto& name : names) {
    // Chat environments need a tokenizer folder (and files or a server): test_dataset_env.cpp,
    // test_tool_env.cpp, test_openenv.cpp.
    if (usesPolicyTokenizer(name)) continue;
    EnvironmentOptions options;
    options.name = name;
    EXPECT_EQ(makeEnvironment(options)->name(), name);
  }
  EnvironmentOptions unknown;
  unknown.name = "chess";
  expectInvalidArgumentNaming([&] { makeEnvironment(unknown); }, {"chess", "arithmetic", "search"});
}

}  // namespace
}  // namespace astraflow
