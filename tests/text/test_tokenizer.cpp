// The built-in task tokenizer: stable ids, whole-token tags, <unk> for anything else, and
// lossless round trips of every prompt and reference action the built-in environments produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "astraflow/tasks/environment.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {
namespace {

const std::vector<std::string> kTags = {"<search>",  "</search>",   "<information>", "</information>", "<answer>",
                                        "</answer>", "<solver>",    "<verifier>",    "<selector>",     "<approve>",
                                        "<reject>",  "<candidate>", "</candidate>"};

TEST(TaskTokenizer, VocabularySizeAndSpecialIds) {
  auto tok = makeTaskTokenizer();
  // 4 special + 13 tags + 10 digits + 12 punctuation + space + 26 letters.
  EXPECT_EQ(tok->vocabSize(), 66);
  EXPECT_EQ(tok->padId(), 0);
  EXPECT_EQ(tok->bosId(), 1);
  EXPECT_EQ(tok->eosId(), 2);
  EXPECT_EQ(tok->unkId(), 3);
  EXPECT_EQ(tok->tokenId("<pad>"), 0);
  EXPECT_EQ(tok->tokenId("<bos>"), 1);
  EXPECT_EQ(tok->tokenId("<eos>"), 2);
  EXPECT_EQ(tok->tokenId("<unk>"), 3);
  EXPECT_EQ(tok->tokenText(2), "<eos>");
}

TEST(TaskTokenizer, IdsAreStable) {
  auto tok = makeTaskTokenizer();
  for (std::size_t i = 0; i < kTags.size(); ++i) {
    EXPECT_EQ(tok->tokenId(kTags[i]), static_cast<std::int32_t>(4 + i)) << kTags[i];
  }
  EXPECT_EQ(tok->tokenId("</answer>"), 9);
  EXPECT_EQ(tok->tokenText(9), "</answer>");
  EXPECT_EQ(tok->tokenId("0"), 17);
  EXPECT_EQ(tok->tokenId("9"), 26);
  EXPECT_EQ(tok->tokenId("+"), 27);
  EXPECT_EQ(tok->tokenId("_"), 38);
  EXPECT_EQ(tok->tokenId(" "), 39);
  EXPECT_EQ(tok->tokenId("a"), 40);
  EXPECT_EQ(tok->tokenId("z"), 65);
  EXPECT_EQ(tok->tokenId("A"), std::nullopt);
  EXPECT_EQ(tok->tokenId("<answer"), std::nullopt);
  for (std::int32_t id = 0; id < tok->vocabSize(); ++id) EXPECT_EQ(tok->tokenId(tok->tokenText(id)), id);
}

TEST(TaskTokenizer, TagsEncodeToOneToken) {
  auto tok = makeTaskTokenizer();
  for (const auto& tag : kTags) {
    const auto ids = tok->encode(tag);
    ASSERT_EQ(ids.size(), 1u) << tag;
    EXPECT_EQ(ids[0], *tok->tokenId(tag)) << tag;
  }
  const auto id = [&](const char* t) { return *tok->tokenId(t); };
  EXPECT_EQ(tok->encode("<answer>46</answer>"),
            (std::vector<std::int32_t>{id("<answer>"), id("4"), id("6"), id("</answer>")}));
}

TEST(TaskTokenizer, UnknownCharactersBecomeUnk) {
  auto tok = makeTaskTokenizer();
  const auto unk = tok->unkId();
  const auto id = [&](const char* t) { return *tok->tokenId(t); };
  EXPECT_EQ(tok->encode("A"), std::vector<std::int32_t>{unk});  // upper case is not lower-cased
  EXPECT_EQ(tok->encode("a>b"), (std::vector<std::int32_t>{id("a"), unk, id("b")}));
  EXPECT_EQ(tok->encode("1<2"), (std::vector<std::int32_t>{id("1"), unk, id("2")}));  // lone '<'
  EXPECT_EQ(tok->encode("<answ"), (std::vector<std::int32_t>{unk, id("a"), id("n"), id("s"), id("w")}));
  EXPECT_EQ(tok->encode("\xC3\xA9x"), (std::vector<std::int32_t>{unk, id("x")}));  // "éx": one <unk> per character
  EXPECT_EQ(tok->encode("\n"), std::vector<std::int32_t>{unk});
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(TaskTokenizer, DecodeDropsSpecialTokens) {
  auto tok = makeTaskTokenizer();
  const auto a = *tok->tokenId("a");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{tok->bosId(), a, tok->unkId(), tok->padId(), a, tok->eosId()}), "aa");
  EXPECT_THROW(tok->decode(std::vector<std::int32_t>{tok->vocabSize()}), std::out_of_range);
  EXPECT_THROW(tok->decode(std::vector<std::int32_t>{-1}), std::out_of_range);
}

TEST(TaskTokenizer, PromptsAndActionsOfBuiltinEnvironmentsRoundTrip) {
  auto tok = makeTaskTokenizer();
  for (const auto& name : {"arithmetic", "search"}) {
    EnvironmentOptions options;
    options.name = name;
    options.operators = "+-*";
    options.digits = 6;
    auto env = makeEnvironment(options);
    for (std::uint64_t id = 0; id < 300; ++id) {
      std::vector<std::string> texts{env->reset(id)};
      for (const auto& action : env->referenceActions()) {
        texts.push_back(action);
        texts.push_back(env->step(action).observation);
      }
      for (const auto& text : texts) {
        const auto ids = tok->encode(text);
        EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->unkId()), 0) << name << ": " << text;
        EXPECT_EQ(tok->decode(ids), text) << name;
      }
    }
  }
}

}  // namespace
}  // namespace astraflow
