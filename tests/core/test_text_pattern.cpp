// TextPattern (core/text_pattern.hpp): RE2 matching with groups, the last of a find-all, and
// texts that crash backtracking engines: 200,000 characters, NUL bytes, invalid UTF-8.
#include <gtest/gtest.h>

#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/core/text_pattern.hpp"

using namespace astraflow;

TEST(TextPattern, SearchGroupsAndFullMatch) {
  const TextPattern p(R"((\d+)-(x)?(\d+))");
  EXPECT_EQ(p.groupCount(), 3);
  const auto m = p.search("ab 12-34 cd");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->whole, "12-34");
  ASSERT_EQ(m->groups.size(), 3u);
  EXPECT_EQ(m->groups[0], "12");
  EXPECT_FALSE(m->groups[1].has_value());  // (x)? took no part
  EXPECT_EQ(m->groups[2], "34");
  EXPECT_FALSE(p.fullMatch("ab 12-34"));
  EXPECT_TRUE(p.fullMatch("12-x34"));
  EXPECT_FALSE(p.search("no digits"));
}

TEST(TextPattern, LastMatchIsTheLastOfAFindAll) {
  const TextPattern p(R"(#(\w+))");
  EXPECT_EQ(p.lastMatch("#a then #bb and #ccc.")->groups[0], "ccc");
  EXPECT_FALSE(p.lastMatch("none here"));
  // An empty match advances: the loop ends, and the last empty match is at the text's end.
  const TextPattern empty("x*");
  const auto m = empty.lastMatch("abxx");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->whole, "");
}

TEST(TextPattern, RefusesWhatRe2CannotMatchInLinearTime) {
  try {
    TextPattern bad(R"((a)\1)", "environment.reward.pattern");
    FAIL() << "a backreference compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("environment.reward.pattern"), std::string::npos) << what;
    EXPECT_NE(what.find("(a)\\1"), std::string::npos) << what;
  }
  EXPECT_THROW(TextPattern("(?=x)"), Error);  // lookahead
  EXPECT_THROW(TextPattern("(unclosed"), Error);
}

TEST(TextPattern, HostileTexts) {
  // std::regex recursed once per character here and overflowed the stack near 40,000.
  const TextPattern answer(R"((?:####|[Aa]nswer(?:\s*is\b)?\s*[:=]|[Aa]nswer\s+is\b)\s*([^\n]+))");
  std::string text = "The answer is: " + std::string(200'000, 'y');
  const auto m = answer.lastMatch(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->groups[0]->size(), 200'000u);
  // (a|b)* style alternation over a long run: exponential for a backtracker without memo.
  const TextPattern nested("^(a|aa)*b$");
  EXPECT_FALSE(nested.search(std::string(200'000, 'a')));
  // NUL bytes are characters like any other; invalid UTF-8 matches nothing but does not stop it.
  const std::string nul("x\0y\0z42", 7);
  EXPECT_EQ(TextPattern(R"(\d+)").search(nul)->whole, "42");
  const std::string broken = "\xff\xfe\xc3(\xe2\x82 answer: 7";
  EXPECT_EQ(TextPattern(R"(answer:\s*(\d))").search(broken)->groups[0], "7");
}
