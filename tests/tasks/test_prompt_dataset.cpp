// Prompt datasets from JSONL: rows with text prompts or conversations, answers and metadata;
// bad lines (not JSON, invalid UTF-8, truncated, a 10 MB line, missing or doubled fields)
// skipped and counted with file and line; duplicates dropped; the eval split and the epoch
// shuffles fixed by the seed; empty or all-bad inputs refused with the files named.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name), std::ios::binary) << text;
  return dir.file(name);
}

TEST(PromptDataset, RowsBadLinesAndDuplicates) {
  test::TempDir dir;
  std::string text;
  text += R"({"prompt": "What is 2+2?", "answer": "4", "source": "gsm", "level": 1})"
          "\n";  // 1
  text += R"({"messages": [{"role": "user", "content": "Hi"}], "answer": 7})"
          "\r\n";     // 2
  text += "\n   \n";  // 3, 4: blank
  text += R"({"prompt": "What is 2+2?", "answer": "4", "source": "other"})"
          "\n";          // 5: duplicate
  text += "not json\n";  // 6
  text += R"(["a", "list"])"
          "\n";  // 7
  text += R"({"answer": "4"})"
          "\n";  // 8: no prompt
  text += R"({"prompt": "x", "messages": []})"
          "\n";  // 9: both: the conversation is taken, and it is empty
  text += R"({"prompt": ""})"
          "\n";                                                      // 10
  text += "{\"prompt\": \"bad \xff byte\"}\n";                       // 11: not UTF-8
  text += "{\"prompt\": \"" + std::string(10 << 20, 'x') + "\"}\n";  // 12: 10 MB
  text += R"({"messages": [{"content": "no role"}]})"
          "\n";  // 13
  text += R"({"prompt": "answer is a list", "answer": [1]})"
          "\n";  // 14
  text += R"({"prompt": "What is 3+3?", "answer": "6"})"
          "\n";                               // 15
  text += R"({"prompt": "truncated", "ans)";  // 16: cut off
  const std::string file = write(dir, "data.jsonl", text);

  const PromptDataset d = PromptDataset::load({file}, {});
  const DatasetReport& r = d.report();
  EXPECT_EQ(r.lines, 14u);
  EXPECT_EQ(r.rows, 3u);
  EXPECT_EQ(r.duplicates, 1u);
  EXPECT_EQ(r.bad, 10u);
  ASSERT_EQ(d.train().size(), 3u);
  EXPECT_TRUE(d.eval().empty());
  EXPECT_EQ(d.train()[0].prompt, "What is 2+2?");
  EXPECT_EQ(d.train()[0].answer, "4");
  EXPECT_EQ(d.train()[0].metadata_json, R"({"source":"gsm","level":1})");
  EXPECT_EQ(d.train()[0].line, 1u);
  EXPECT_EQ(d.train()[1].messages_json, R"([{"role":"user","content":"Hi"}])");
  EXPECT_EQ(d.train()[1].answer, "7");
  EXPECT_EQ(d.train()[2].line, 15u);
  std::vector<std::size_t> bad_lines;
  for (const DatasetIssue& issue : r.first_issues) {
    bad_lines.push_back(issue.line);
    EXPECT_EQ(issue.file, file);
  }
  EXPECT_EQ(bad_lines, (std::vector<std::size_t>{6, 7, 8, 9, 10, 11, 12, 13, 14, 16}));
  EXPECT_NE(r.first_issues[6].what.find("past the limit"), std::string::npos) << r.first_issues[6].what;
  EXPECT_NE(r.first_issues[0].what.find("not valid JSON"), std::string::npos);
}

TEST(PromptDataset, SplitAndEpochOrdersComeFromTheSeed) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "{\"prompt\": \"problem " + std::to_string(i) + "\", \"answer\": \"1\"}\n";
  const std::string file = write(dir, "many.jsonl", text);
  DatasetOptions o;
  o.eval_fraction = 0.25;
  o.seed = 7;
  const PromptDataset a = PromptDataset::load({file}, o);
  const PromptDataset b = PromptDataset::load({file}, o);
  EXPECT_GT(a.eval().size(), 400u);
  EXPECT_LT(a.eval().size(), 600u);
  EXPECT_EQ(a.eval().size() + a.train().size(), 2000u);
  ASSERT_EQ(a.eval().size(), b.eval().size());
  for (std::size_t i = 0; i < a.eval().size(); ++i) EXPECT_EQ(a.eval()[i].prompt, b.eval()[i].prompt);
  o.seed = 8;
  const PromptDataset c = PromptDataset::load({file}, o);
  std::set<std::string> eval_a, eval_c;
  for (const auto& row : a.eval()) eval_a.insert(row.prompt);
  for (const auto& row : c.eval()) eval_c.insert(row.prompt);
  EXPECT_NE(eval_a, eval_c);

  const auto e0 = a.epochOrder(0), e0_again = b.epochOrder(0), e1 = a.epochOrder(1), c0 = c.epochOrder(0);
  EXPECT_EQ(e0, e0_again);  // a resumed run continues the same order
  EXPECT_NE(e0, e1);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);  // a permutation
  EXPECT_NE(e0.size(), 0u);
}

TEST(PromptDataset, UnusableInputIsRefusedNamingTheFiles) {
  test::TempDir dir;
  const std::string empty = write(dir, "empty.jsonl", "");
  const std::string bad = write(dir, "bad.jsonl", "nope\n{\"x\": 1}\n");
  for (const std::vector<std::filesystem::path>& files :
       {std::vector<std::filesystem::path>{empty}, {bad}, {empty, bad}, {dir.file("missing.jsonl")}}) {
    try {
      PromptDataset::load(files, {});
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(files.back().string()), std::string::npos) << e.what();
    }
  }
  DatasetOptions o;
  o.eval_fraction = 1.5;
  EXPECT_THROW(PromptDataset::load({bad}, o), Error);
}

}  // namespace
