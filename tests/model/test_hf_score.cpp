// `astraflow score` against transformers: the log-probability of every next token of 18 random
// sequences under random Qwen3 and Llama folders that transformers made (tests/model/
// hf_reference.py), to 1e-4; a {"text": ...} line is encoded with the folder's tokenizer.json
// and scored like the same ids; bad lines are answered in place with an error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/text/hf_tokenizer.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;
using nlohmann::json;

namespace {

std::vector<json> runScore(const std::string& folder, const std::vector<json>& inputs, const test::TempDir& dir,
                           int* exit_code) {
  {
    std::ofstream in(dir.file("score_in.jsonl"));
    for (const json& j : inputs) in << j.dump() << "\n";
  }
  const int rc = std::system(fmt::format("{} score --model {} < {} > {} 2>/dev/null", std::getenv("ASTRAFLOW_CLI"),
                                         folder, dir.file("score_in.jsonl"), dir.file("score_out.jsonl"))
                                 .c_str());
  *exit_code = WEXITSTATUS(rc);
  std::ifstream out(dir.file("score_out.jsonl"));
  std::vector<json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(ScoreCli, LogProbsAsTransformers) {
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_HF_REFERENCE");
  ASSERT_TRUE(py && script && std::getenv("ASTRAFLOW_CLI")) << "run under ctest";
  test::TempDir dir;
  ASSERT_EQ(std::system(fmt::format("{} {} make qwen3,llama3_rope {} 13", py, script, dir.path().string()).c_str()), 0);
  for (const char* family : {"qwen3", "llama3_rope"}) {
    std::ifstream in(dir.path() / family / "reference.json");
    const json ref = json::parse(in);
    std::vector<json> inputs;
    for (const json& seq : ref["sequences"]) inputs.push_back({{"tokens", seq}});
    int rc = -1;
    const auto lines = runScore((dir.path() / family).string(), inputs, dir, &rc);
    EXPECT_EQ(rc, 0) << family;
    ASSERT_EQ(lines.size(), inputs.size()) << family;
    double worst = 0;
    for (std::size_t s = 0; s < lines.size(); ++s) {
      const auto lp = lines[s]["logprobs"].get<std::vector<double>>();
      const auto want = ref["logprobs"][s].get<std::vector<double>>();  // [0] = 0, then log p(t | <t)
      ASSERT_EQ(lines[s]["tokens"], ref["sequences"][s]);
      ASSERT_EQ(lp.size() + 1, want.size());
      for (std::size_t t = 0; t < lp.size(); ++t) worst = std::max(worst, std::abs(lp[t] - want[t + 1]));
    }
    EXPECT_LE(worst, 1e-4) << family;
  }
}

TEST(ScoreCli, TextLinesAndBadLines) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr);
  test::TempDir dir;
  const std::string folder = dir.file("tiny");
  ASSERT_EQ(std::system(fmt::format("{} init-model {} --seed 3 > /dev/null", cli, folder).c_str()), 0);
  const std::string text = "Hello, wörld!\n<|im_start|>user";
  std::vector<json> ids;
  for (std::int32_t id : HfTokenizer::load(folder)->encode(text)) ids.push_back(id);
  int rc = -1;
  const auto lines = runScore(folder,
                              {{{"text", text}},
                               {{"tokens", ids}},
                               {{"tokens", {1, 999999}}},
                               {{"tokens", std::vector<int>(5000, 1)}},
                               {{"what", 1}},
                               {{"tokens", json::array()}}},
                              dir, &rc);
  EXPECT_EQ(rc, 3);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0]["tokens"], json(ids));
  EXPECT_EQ(lines[0]["logprobs"], lines[1]["logprobs"]);
  EXPECT_EQ(lines[0]["logprobs"].size(), ids.size() - 1);
  for (std::size_t i = 2; i < 6; ++i) EXPECT_TRUE(lines[i].contains("error")) << lines[i].dump();
  EXPECT_NE(lines[2]["error"].get<std::string>().find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(lines[3]["error"].get<std::string>().find("positions"), std::string::npos);
}

}  // namespace
