// Chat templates against transformers' apply_chat_template (tests/text/chat_templates.py):
// Qwen3's own template (tools, tool calls and responses, <think> reasoning, the enable_thinking
// switch), the Llama-3 Instruct template, a Llama-3.1-style tool template and init-model's
// ChatML one, over 120 generated conversations each; where transformers' rendering raises
// (raise_exception), astraflow's must raise too. Templates outside the supported subset are
// refused by name when loaded.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/text/chat_template.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;
using nlohmann::ordered_json;

namespace {

constexpr int kConversations = 120;

// The reference folders and renderings, made once for the program (the TEST_P and TEST_F
// suites below share them: one Python start, as importing transformers costs seconds).
struct Reference {
  test::TempDir dir;
  bool made = false;
  Reference() {
    const char* py = std::getenv("ASTRAFLOW_PYTHON");
    const char* script = std::getenv("ASTRAFLOW_TOKENIZER_REFERENCE");
    if (!py || !script) return;
    const std::string base = fmt::format("{} {} ", py, script);
    std::filesystem::create_directories(dir.path() / "chatml");
    writeByteLevelTokenizer(dir.path() / "chatml");
    std::string folders;
    for (const char* name : {"qwen3", "llama3", "llama3_tools", "chatml"})
      folders += (folders.empty() ? "" : ",") + (dir.path() / name).string();
    made = std::system((base + "files " + dir.path().string()).c_str()) == 0 &&
           std::system(fmt::format("{}conversations {} 5 {}", base, kConversations, dir.file("conv.jsonl")).c_str()) ==
               0 &&
           std::system(fmt::format("{}chat {} {}", base, dir.file("conv.jsonl"), folders).c_str()) == 0;
  }
};

const Reference& reference() {
  static const Reference r;
  return r;
}

class Templates : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reference().made) << "tests/text/tokenizer_reference.py failed or ASTRAFLOW_PYTHON / "
                                     "ASTRAFLOW_TOKENIZER_REFERENCE unset (run under ctest)";
  }
  static std::filesystem::path folder(const std::string& name) { return reference().dir.path() / name; }
  static std::string file(const std::string& name) { return reference().dir.file(name); }
};

std::vector<ordered_json> readLines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<ordered_json> out;
  for (std::string line; std::getline(in, line);) out.push_back(ordered_json::parse(line));
  return out;
}

TEST_P(Templates, RenderAsApplyChatTemplate) {
  const ChatTemplate tpl = ChatTemplate::load(folder(GetParam()));
  const auto conversations = readLines(file("conv.jsonl"));
  const auto expected = readLines(folder(GetParam()) / "chat.jsonl");
  ASSERT_EQ(conversations.size(), static_cast<std::size_t>(kConversations));
  ASSERT_EQ(expected.size(), conversations.size());
  int wrong = 0, raised = 0;
  for (std::size_t i = 0; i < conversations.size(); ++i) {
    const ordered_json& c = conversations[i];
    ChatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (c.contains("tools")) options.tools = c["tools"];
    if (c.contains("extra")) options.extra = c["extra"];
    std::string got, error;
    try {
      got = tpl.render(c["messages"], options);
    } catch (const Error& e) {
      error = e.what();
    }
    if (expected[i].contains("error")) {
      ++raised;
      EXPECT_FALSE(error.empty()) << "conversation " << i << ": transformers raised " << expected[i]["error"]
                                  << ", astraflow rendered";
      if (expected[i]["error"].get<std::string>().find("single tool-calls") != std::string::npos) {
        EXPECT_NE(error.find("the template raised: This model only supports single tool-calls"), std::string::npos)
            << error;
      }
      continue;
    }
    const std::string want = expected[i]["text"].get<std::string>();
    if ((got != want || !error.empty()) && ++wrong <= 3) {
      ADD_FAILURE() << "conversation " << i << " " << c.dump() << "\n--- astraflow (" << error << ")\n"
                    << got << "\n--- transformers\n"
                    << want;
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << conversations.size();
  if (GetParam() == "llama3_tools") {
    EXPECT_GT(raised, 0);  // the one-tool-call rule was exercised
  }
}

INSTANTIATE_TEST_SUITE_P(Folders, Templates, ::testing::Values("qwen3", "llama3", "llama3_tools", "chatml"),
                         [](const auto& p) { return p.param; });

// `astraflow tokenize --chat` renders and encodes as apply_chat_template(tokenize=True).
TEST_F(Templates, TokenizeChatCliGivesTheSameIds) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr);
  const auto conversations = readLines(file("conv.jsonl"));
  const auto expected = readLines(folder("qwen3") / "chat.jsonl");
  {
    std::ofstream in(file("chat_in.jsonl"));
    for (const ordered_json& c : conversations) {
      ordered_json line = {{"messages", c["messages"]}, {"add_generation_prompt", c["add_generation_prompt"]}};
      if (c.contains("tools")) line["tools"] = c["tools"];
      const ordered_json extra = c.value("extra", ordered_json::object());
      for (const auto& [k, v] : extra.items()) line[k] = v;
      in << line.dump() << "\n";
    }
  }
  ASSERT_EQ(std::system(fmt::format("{} tokenize --chat --tokenizer {} < {} > {}", cli, folder("qwen3").string(),
                                    file("chat_in.jsonl"), file("chat_out.jsonl"))
                            .c_str()),
            0);
  const auto got = readLines(file("chat_out.jsonl"));
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["ids"], expected[i]["ids"]) << "conversation " << i;
}

// Qwen3's thinking switch: the empty think block comes only with enable_thinking=false.
TEST_F(Templates, Qwen3ThinkingSwitch) {
  const ChatTemplate tpl = ChatTemplate::load(folder("qwen3"));
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "2+2?"}])");
  ChatOptions on;
  on.add_generation_prompt = true;
  ChatOptions off = on;
  off.extra = {{"enable_thinking", false}};
  EXPECT_EQ(tpl.render(messages, on), "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tpl.render(messages, off),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateSource, UnsupportedPartsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{% include 'x.jinja' %}", "tag 'include'"},
      {"{{ messages | wordwrap(10) }}", "filter 'wordwrap'"},
      {"{% if x is escaped %}{% endif %}", "test 'escaped'"},
      {"{% for m in messages %}", "endfor"},
      {"{{ 'unclosed }}", "not closed"},
      {"{% for m in messages recursive %}{% endfor %}", "recursive"},
  };
  for (const auto& [source, what] : cases) {
    try {
      ChatTemplate::fromSource(source);
      ADD_FAILURE() << source << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    }
  }
  const ChatTemplate raising = ChatTemplate::fromSource("{{ raise_exception('no system role') }}");
  EXPECT_THROW(raising.render(ordered_json::array()), Error);
  const ChatTemplate bad_attribute = ChatTemplate::fromSource("{{ messages[0].role.name.x }}");
  EXPECT_THROW(bad_attribute.render(ordered_json::parse(R"([{"role": "user"}])")), Error);
}

}  // namespace
