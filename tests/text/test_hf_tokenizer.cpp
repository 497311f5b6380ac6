// tokenizer.json files against the reference implementation, the `tokenizers` library
// (tests/text/tokenizer_reference.py): Qwen3's own file, a Llama-3-style and a GPT-2-style one
// trained by the reference itself, and 2,400 generated strings (prose, contractions, numbers,
// whitespace runs, code, CJK and other scripts, emoji, combining marks, special-token
// spellings, random code points). Every string must encode to the reference's ids with and
// without the post-processor's special tokens, decode to the reference's text, and round-trip
// (to its NFC form where the file normalises). `astraflow tokenize` must print the same ids.
// Files this does not implement are refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/text/hf_tokenizer.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;
using nlohmann::json;

namespace {

constexpr int kStrings = 2400;

struct Expected {
  std::vector<std::int32_t> ids, plain;
  std::string decoded, skipped, nfc;
};

std::vector<std::string> readStrings(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line).get<std::string>());
  return out;
}

std::vector<Expected> readExpected(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<Expected> out;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    out.push_back({j["ids"].get<std::vector<std::int32_t>>(), j["plain"].get<std::vector<std::int32_t>>(),
                   j["decoded"].get<std::string>(), j["skipped"].get<std::string>(), j["nfc"].get<std::string>()});
  }
  return out;
}

std::string show(const std::vector<std::int32_t>& ids) { return json(ids).dump(); }

class Tokenizers : public ::testing::TestWithParam<std::string> {
 public:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const char* py = std::getenv("ASTRAFLOW_PYTHON");
    const char* script = std::getenv("ASTRAFLOW_TOKENIZER_REFERENCE");
    if (!py || !script) return;
    const std::string base = fmt::format("{} {} ", py, script);
    made_ = std::system((base + "files " + dir_->path().string()).c_str()) == 0 &&
            std::system(fmt::format("{}strings {} 7 {}", base, kStrings, dir_->file("strings.jsonl")).c_str()) == 0;
    for (const char* name : {"qwen3", "llama3", "gpt2"}) {
      made_ = made_ && std::system(fmt::format("{}encode {} {} {}", base, (dir_->path() / name).string(),
                                               dir_->file("strings.jsonl"), dir_->file(std::string(name) + ".jsonl"))
                                       .c_str()) == 0;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

 protected:
  void SetUp() override {
    ASSERT_TRUE(made_) << "tests/text/tokenizer_reference.py failed or ASTRAFLOW_PYTHON / "
                          "ASTRAFLOW_TOKENIZER_REFERENCE unset (run under ctest)";
  }
  static std::filesystem::path folder(const std::string& name) { return dir_->path() / name; }
  static test::TempDir* dir_;
  static bool made_;
};
test::TempDir* Tokenizers::dir_ = nullptr;
bool Tokenizers::made_ = false;

TEST_P(Tokenizers, EncodeAndDecodeAsTheTokenizersLibrary) {
  const auto tokenizer = HfTokenizer::load(folder(GetParam()));
  const auto strings = readStrings(dir_->file("strings.jsonl"));
  const auto expected = readExpected(dir_->file(GetParam() + ".jsonl"));
  ASSERT_EQ(strings.size(), static_cast<std::size_t>(kStrings));
  ASSERT_EQ(expected.size(), strings.size());
  int wrong = 0;
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    const auto ids = tokenizer->encode(strings[i], true);
    const auto plain = tokenizer->encode(strings[i], false);
    const std::string decoded = tokenizer->decode(plain, false);
    const std::string skipped = tokenizer->decode(ids);
    tokens += plain.size();
    const bool ok = ids == expected[i].ids && plain == expected[i].plain && decoded == expected[i].decoded &&
                    skipped == expected[i].skipped;
    if (!ok && ++wrong <= 5) {
      ADD_FAILURE() << "string " << i << " " << json(strings[i]).dump() << "\n  ids      " << show(ids)
                    << "\n  expected " << show(expected[i].ids) << "\n  decoded " << json(decoded).dump()
                    << "\n  expected " << json(expected[i].decoded).dump() << "\n  skipped " << json(skipped).dump()
                    << " expected " << json(expected[i].skipped).dump();
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << strings.size() << " strings";
  EXPECT_GT(tokens, strings.size() * 5);  // the strings are not trivially short
}

// decode(encode(s)) gives s back (its NFC form where the file normalises), but for the strings
// with the Llama-3-style file's lstrip/rstrip tokens, which take the spaces beside them; and
// the special tokens the post-processor adds are the ones the file names.
TEST_P(Tokenizers, RoundTripAndSpecialTokens) {
  const auto tokenizer = HfTokenizer::load(folder(GetParam()));
  const auto strings = readStrings(dir_->file("strings.jsonl"));
  const auto expected = readExpected(dir_->file(GetParam() + ".jsonl"));
  int checked = 0, changed_by_nfc = 0;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    const std::string& s = strings[i];
    if (GetParam() == "gpt2") break;  // add_prefix_space puts a space before every piece
    if (GetParam() == "llama3" && (s.find("<mask>") != std::string::npos || s.find("[tool]") != std::string::npos))
      continue;
    const std::string& want = GetParam() == "qwen3" ? expected[i].nfc : s;
    changed_by_nfc += want != s;
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(s, false), false), want) << "string " << i << " " << json(s).dump();
    ++checked;
  }
  if (GetParam() != "gpt2") {
    EXPECT_GT(checked, kStrings * 8 / 10);
  }
  if (GetParam() == "qwen3") {
    EXPECT_GT(changed_by_nfc, 50);  // decomposed marks were in the strings, and NFC composed them
    EXPECT_EQ(tokenizer->eosId(), *tokenizer->tokenId("<|im_end|>"));
    EXPECT_EQ(tokenizer->padId(), *tokenizer->tokenId("<|endoftext|>"));
    EXPECT_EQ(tokenizer->bosId(), -1);
    EXPECT_EQ(tokenizer->vocabSize(), 151669);
    EXPECT_EQ(tokenizer->encode("<|im_start|>user", true), tokenizer->encode("<|im_start|>user", false));
  }
  if (GetParam() == "llama3") {
    const auto bos = tokenizer->tokenId("<|begin_of_text|>");
    ASSERT_TRUE(bos.has_value());
    EXPECT_EQ(tokenizer->bosId(), *bos);
    const auto ids = tokenizer->encode("hello", true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), *bos);
    EXPECT_TRUE(tokenizer->isSpecial(*bos));
    EXPECT_EQ(tokenizer->decode(ids), "hello");  // skip_special_tokens drops it again
  }
}

TEST_P(Tokenizers, CliPrintsTheSameIds) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr);
  const std::string out = dir_->file(GetParam() + ".cli.jsonl");
  ASSERT_EQ(std::system(fmt::format("{} tokenize --tokenizer {} < {} > {}", cli, folder(GetParam()).string(),
                                    dir_->file("strings.jsonl"), out)
                            .c_str()),
            0);
  const auto expected = readExpected(dir_->file(GetParam() + ".jsonl"));
  std::ifstream in(out);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    ASSERT_LT(n, expected.size());
    ASSERT_EQ(json::parse(line)["ids"].get<std::vector<std::int32_t>>(), expected[n].ids) << "line " << n + 1;
  }
  EXPECT_EQ(n, expected.size());
}

INSTANTIATE_TEST_SUITE_P(Files, Tokenizers, ::testing::Values("qwen3", "llama3", "gpt2"),
                         [](const auto& p) { return p.param; });

// A bad input line gets an error line in its place (outputs stay aligned) and exit code 3.
TEST(TokenizeCli, BadLinesAreReportedInPlace) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr);
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "tok");
  {
    std::ofstream f(dir.path() / "tok" / "tokenizer.json");
    f << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
    std::ofstream in(dir.file("in.jsonl"));
    in << "\"ab\"\n{\"text\": 1}\nnot json\n\"\xff\"\n\"ba\"\n";
  }
  const int rc = std::system(fmt::format("{} tokenize --tokenizer {} < {} > {} 2>/dev/null", cli,
                                         (dir.path() / "tok").string(), dir.file("in.jsonl"), dir.file("out.jsonl"))
                                 .c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 3);
  std::ifstream out(dir.file("out.jsonl"));
  std::vector<json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0]["ids"], json::array({2}));
  for (int i : {1, 2, 3}) EXPECT_TRUE(lines[static_cast<std::size_t>(i)].contains("error")) << i;
  EXPECT_NE(lines[3]["error"].get<std::string>().find("UTF-8"), std::string::npos);
  EXPECT_EQ(lines[4]["ids"], json::array({1, 0}));
}

// What is not implemented is refused by name, with the file named.
TEST(TokenizerFiles, UnsupportedPartsAreRefusedByName) {
  test::TempDir dir;
  const std::string vocab = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {"type": "Unigram", "vocab": []}})", "'Unigram'"},
      {"{" + vocab + R"(, "pre_tokenizer": {"type": "Metaspace", "replacement": "_"}})", "'Metaspace'"},
      {"{" + vocab + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"}})",
       "\\\\w+"},
      {"{" + vocab + R"(, "normalizer": {"type": "Lowercase"}})", "'Lowercase'"},
      {"{" + vocab + R"(, "decoder": {"type": "WordPiece"}})", "'WordPiece'"},
      {"{" + vocab + R"(, "post_processor": {"type": "BertProcessing"}})", "'BertProcessing'"},
      {"{" + vocab + R"(, "truncation": {"max_length": 8}})", "truncation"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "merge 0"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true}})", "byte_fallback"},
      {R"({"added_tokens": []})", "not a tokenizer.json"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string file = dir.file(fmt::format("t{}.json", i));
    std::ofstream(file) << cases[i].first;
    try {
      HfTokenizer::load(file);
      ADD_FAILURE() << "case " << i << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cases[i].second), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  }
  const std::string ok = dir.file("ok.json");
  std::ofstream(ok) << "{" << vocab << "}";
  const auto t = HfTokenizer::load(ok);
  EXPECT_THROW(t->encode("a\xc3"), Error);  // truncated UTF-8
  const std::vector<std::int32_t> unknown = {7};
  EXPECT_THROW(t->decode(unknown), Error);
}

}  // namespace
