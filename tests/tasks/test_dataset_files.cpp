// Prompt datasets as they come (docs/tasks.md, "Files"): Parquet files, Arrow IPC streams and
// files, and a Hugging Face `datasets` folder of three shards, written by `datasets` and pyarrow
// (tests/tasks/dataset_files.py), read by astraflow and compared row by row with what those
// libraries read back; verl's layout and MATH-500's columns without a mapping, other columns with
// one; bad rows skipped, counted and named by file and row; a file with no usable row refused by
// name; prompt rewrites and the token limit of the policy's tokenizer.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/code_reward.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"
#include "tasks/dataset_environment.hpp"

using namespace astraflow;
using json = nlohmann::ordered_json;

namespace {

const std::string kDapoSuffix = "Let's think step by step and output the final answer within \\boxed{}.";

// The files dataset_files.py writes, made once for the suite.
class DatasetFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* py = std::getenv("ASTRAFLOW_PYTHON");
    const char* script = std::getenv("ASTRAFLOW_DATASET_FILES");
    ASSERT_TRUE(py && script) << "run under ctest (ASTRAFLOW_PYTHON, ASTRAFLOW_DATASET_FILES)";
    dir_ = new test::TempDir();
    ASSERT_EQ(std::system(fmt::format("{} {} {} > /dev/null 2>&1", py, script, dir_->path().string()).c_str()), 0);
    expected_ = new json(json::parse(std::ifstream(dir_->file("expected.json"))));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete dir_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static const json& expected(const std::string& name) { return (*expected_)[name]; }

  static PromptDataset load(const std::string& name, DatasetOptions options = {}) {
    return PromptDataset::load({file(name)}, options);
  }

 private:
  static test::TempDir* dir_;
  static json* expected_;
};
test::TempDir* DatasetFiles::dir_ = nullptr;
json* DatasetFiles::expected_ = nullptr;

// verl's rows: the prompt conversation as messages, the ground truth as the answer, the rest
// (data_source, ability, reward_model, extra_info) as metadata, values as `datasets` reads them.
void expectVerlRows(const PromptDataset& d, const json& rows) {
  ASSERT_EQ(d.train().size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PromptRow& r = d.train()[i];
    EXPECT_TRUE(r.prompt.empty());
    EXPECT_EQ(json::parse(r.messages_json), rows[i]["prompt"]) << i;
    EXPECT_EQ(r.answer, rows[i]["reward_model"]["ground_truth"]) << i;
    const json meta = json::parse(r.metadata_json);
    EXPECT_EQ(meta["data_source"], rows[i]["data_source"]);
    EXPECT_EQ(meta["extra_info"], rows[i]["extra_info"]);
    EXPECT_EQ(meta["reward_model"], rows[i]["reward_model"]);
    EXPECT_FALSE(meta.contains("prompt"));
  }
}

}  // namespace

TEST_F(DatasetFiles, VerlParquetAndArrowReadAsTheLibrariesReadThem) {
  for (const char* name : {"verl.parquet", "stream.arrow", "file.arrow"}) {
    SCOPED_TRACE(name);
    const PromptDataset d = load(name);
    EXPECT_EQ(d.report().bad, 0u);
    EXPECT_EQ(d.report().lines, expected(name).size());
    expectVerlRows(d, expected(name));
  }
}

TEST_F(DatasetFiles, ADatasetsFolderReadsItsShardsInOrder) {
  const PromptDataset d = load("saved");
  const json& rows = expected("saved");
  ASSERT_EQ(d.train().size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PromptRow& r = d.train()[i];
    EXPECT_EQ(r.prompt, rows[i]["problem"]) << i;  // MATH-500's `problem`, read without a mapping
    EXPECT_EQ(r.answer, rows[i]["answer"]) << i;
    const json meta = json::parse(r.metadata_json);
    EXPECT_EQ(meta["solution"], rows[i]["solution"]);
    EXPECT_EQ(meta["level"], rows[i]["level"]);  // an integer stays a number
    EXPECT_EQ(meta["subject"], rows[i]["subject"]);
    EXPECT_EQ(r.file, file("saved"));
    EXPECT_EQ(r.line, i + 1);  // rows numbered across the shards
  }
}

TEST_F(DatasetFiles, ColumnsMapOtherNames) {
  DatasetOptions o;
  o.columns = {{"prompt", "question_text"}, {"answer", "final"}};
  const PromptDataset d = load("mapped.parquet", o);
  const json& rows = expected("mapped.parquet");
  ASSERT_EQ(d.train().size(), rows.size());  // three row groups of up to 7
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(d.train()[i].prompt, rows[i]["question_text"]);
    EXPECT_EQ(d.train()[i].answer, rows[i]["final"].dump());  // an integer answer as its text
    const json meta = json::parse(d.train()[i].metadata_json);
    EXPECT_EQ(meta["tags"], rows[i]["tags"]);
    EXPECT_FALSE(meta.contains("question_text"));
  }
  // A mapped column the file lacks: every row says so, and the file is refused by name.
  o.columns = {{"prompt", "question"}};
  try {
    load("mapped.parquet", o);
    ADD_FAILURE() << "a missing column was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mapped.parquet"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has no column \"question\" (environment.columns.prompt)"), std::string::npos)
        << e.what();
  }
}

// APPS' layout: the question is the prompt, `input_output` mapped to the code reward's tests; a
// row's program is scored on them as the harness runs them.
TEST_F(DatasetFiles, CodeRowsWithCallBasedTests) {
  DatasetOptions o;
  o.columns = {{"tests", "input_output"}};
  const PromptDataset d = load("apps.parquet", o);
  const json& rows = expected("apps.parquet");
  ASSERT_EQ(d.train().size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(d.train()[i].prompt, rows[i]["question"]);
    const json meta = json::parse(d.train()[i].metadata_json);
    ASSERT_TRUE(meta.contains("tests"));
    EXPECT_FALSE(meta.contains("input_output"));
    const std::string program = fmt::format("```python\ndef add{0}(a, b):\n    return a + b + {0}\n```", i);
    CodeRewardOptions run;
    run.limits.wall_seconds = 5;
    EXPECT_EQ(scoreCode(program, meta["tests"].get<std::string>(), run).result.reward, 1.0) << i;
    EXPECT_EQ(
        scoreCode("```python\ndef add0(a, b):\n    return 0\n```", meta["tests"].get<std::string>(), run).result.reward,
        0.0);
  }
}

// Columns mapped onto each other swap; a row with both a prompt and a conversation takes the
// conversation (or the mapped one); float answers are written as a reader writes them; bytes are
// not copied into the row.
TEST_F(DatasetFiles, MappingsAndTheRowsUsersMeet) {
  DatasetOptions swap;
  swap.columns = {{"prompt", "answer"}, {"answer", "prompt"}};
  const PromptDataset swapped = load("bad.parquet", swap);  // rows whose answer is text become prompts
  ASSERT_FALSE(swapped.train().empty());
  EXPECT_EQ(swapped.train()[0].prompt, "1");
  EXPECT_EQ(swapped.train()[0].answer, "good 1");

  DatasetOptions f32;
  f32.columns = {{"answer", "answer32"}};
  const PromptDataset both = load("both.parquet", f32);
  ASSERT_EQ(both.train().size(), 2u);
  EXPECT_TRUE(both.train()[0].prompt.empty());  // the conversation was taken
  EXPECT_EQ(json::parse(both.train()[0].messages_json)[0]["content"], "the conversation");
  EXPECT_EQ(both.train()[0].answer, "1234.56");  // float32, not 1234.56005859375
  EXPECT_EQ(both.train()[1].answer, "0.1");
  EXPECT_TRUE(json::parse(both.train()[0].metadata_json)["image"].is_null());
  DatasetOptions f64;
  f64.columns = {{"answer", "answer64"}, {"prompt", "prompt"}};
  const PromptDataset mapped = load("both.parquet", f64);
  EXPECT_EQ(mapped.train()[0].prompt, "the text");  // the mapped prompt, not the conversation
  EXPECT_EQ(mapped.train()[0].answer, "0.00001");   // not 1e-05
  EXPECT_EQ(mapped.train()[1].answer, "250000000000000000000");
}

TEST_F(DatasetFiles, MalformedFilesAndFoldersAreRefusedByName) {
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"broken.arrow", "cannot be read as a table"}, {"cache", "has no state.json"}}) {
    try {
      load(name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file(name)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST_F(DatasetFiles, BadRowsAreSkippedCountedAndNamed) {
  const PromptDataset d = PromptDataset::load({file("bad.parquet"), file("verl.parquet")}, {});
  EXPECT_EQ(d.train().size(), 4u + 50u);  // good 1-4, and verl's
  const DatasetReport& r = d.report();
  EXPECT_EQ(r.lines, 6u + 50u);
  EXPECT_EQ(r.bad, 2u);  // a null and an empty prompt
  ASSERT_EQ(r.first_issues.size(), 2u);
  EXPECT_EQ(r.first_issues[0].file, file("bad.parquet"));
  EXPECT_EQ(r.first_issues[0].line, 2u);
  EXPECT_EQ(r.first_issues[1].line, 4u);
  EXPECT_NE(r.first_issues[1].what.find("non-empty string"), std::string::npos) << r.first_issues[1].what;
  // A file none of whose rows can be used is a mistake (a wrong layout, a wrong column), named with
  // its first bad row.
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"none.parquet", "none.parquet: no usable rows (4 rows, all skipped; e.g. "},
           {"odd.parquet", "odd.parquet:1: \"prompt\" is not a non-empty string"}}) {
    try {
      PromptDataset::load({file("verl.parquet"), file(name)}, {});
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  // Not a table at all: refused naming the file.
  std::ofstream(file("fake.parquet")) << "not parquet";
  EXPECT_THROW(load("fake.parquet"), Error);
}

TEST_F(DatasetFiles, PromptsAreRewrittenAndHeldToATokenLimit) {
  DatasetOptions o;
  o.rewrite.strip_suffixes = {"no such suffix", kDapoSuffix};
  o.rewrite.append = "\nPut the answer in \\boxed{}.";
  const PromptDataset d = load("verl.parquet", o);
  const json& rows = expected("verl.parquet");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string content = rows[i]["prompt"][0]["content"];
    content = content.substr(0, content.size() - kDapoSuffix.size());
    while (!content.empty() && content.back() == '\n') content.pop_back();
    EXPECT_EQ(json::parse(d.train()[i].messages_json)[0]["content"], content + o.rewrite.append);
  }
  // The limit counts the prompt as the policy gets it: rendered with the template, in the
  // folder's tokens. Held at the shortest length, exactly the rows at or under it stay.
  std::filesystem::create_directories(file("model"));
  writeByteLevelTokenizer(file("model"));
  const ChatTemplate chat = ChatTemplate::load(file("model"));
  const auto tokenizer = HfTokenizer::load(file("model"));
  std::vector<std::size_t> lengths;
  const PromptDataset saved = load("saved");
  for (const auto& row : saved.train()) {
    ChatOptions gen;
    gen.add_generation_prompt = true;
    lengths.push_back(
        tokenizer->encode(chat.render(json::array({{{"role", "user"}, {"content", row.prompt}}}), gen)).size());
  }
  std::vector<std::size_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t limit = sorted.front();
  DatasetTaskOptions task;
  task.train_files = {file("saved")};
  task.tokenizer_folders = {file("model")};
  task.max_prompt_tokens = limit;
  const auto loaded = detail::sharedDatasetTask(task);
  const auto kept = static_cast<std::size_t>(
      std::count_if(lengths.begin(), lengths.end(), [&](std::size_t n) { return n <= limit; }));
  ASSERT_LT(kept, lengths.size());
  EXPECT_EQ(loaded->train.train().size(), kept);
  EXPECT_EQ(loaded->train.report().bad, lengths.size() - kept);
  EXPECT_NE(loaded->train.report().first_issues.at(0).what.find("tokens, past the limit of " + std::to_string(limit)),
            std::string::npos);
}
