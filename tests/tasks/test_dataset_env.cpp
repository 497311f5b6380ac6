// The `dataset` environment: JSONL rows rendered with the policy folder's chat template, scored
// by the configured reward against the row's answer; problem ids that index the rows (training
// rows once per epoch in the seed's order, held-out rows apart); row metadata for curators; the
// folder's tokenizer for the run; and the `environment` config keys that set it up.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

constexpr int kTrainRows = 40;
constexpr int kEvalRows = 5;

struct DatasetFixture {
  test::TempDir dir;
  EnvironmentOptions options;

  DatasetFixture() {
    std::filesystem::create_directories(dir.file("model"));
    writeByteLevelTokenizer(dir.file("model"));
    std::ofstream train(dir.file("train.jsonl"));
    for (int i = 0; i < kTrainRows; ++i)
      train << fmt::format(R"({{"prompt": "What is {}+1?", "answer": "{}", "level": {}, "tag": "t{}"}})", i, i + 1,
                           i % 3, i)
            << "\n";
    train << "not json\n";  // counted and skipped
    train << R"({"messages": [{"role": "system", "content": "Own."}, {"role": "user", "content": "Say 7."}], )"
          << R"("answer": "7", "solution": "It is \\boxed{7}."})"
          << "\n";
    std::ofstream eval(dir.file("eval.jsonl"));
    for (int i = 0; i < kEvalRows; ++i)
      eval << fmt::format(R"({{"prompt": "What is {}+2?", "answer": "{}"}})", 100 + i, 102 + i) << "\n";
    options.name = "dataset";
    options.dataset.train_files = {dir.file("train.jsonl")};
    options.dataset.eval_files = {dir.file("eval.jsonl")};
    options.dataset.system_prompt = "Answer with \\boxed{}.";
    options.dataset.tokenizer_folders = {dir.file("model")};
    options.dataset.seed = 3;
  }
};

TEST(DatasetEnvironment, RendersScoresAndIndexesRows) {
  DatasetFixture f;
  auto env = makeEnvironment(f.options);
  EXPECT_TRUE(env->rendersWholeSequence());
  EXPECT_EQ(env->maxTurns(), 1);

  // An epoch visits every training row once (41 = 40 prompts + the conversation); the next epoch
  // is another order of the same rows; held-out ids never name a training row.
  const std::size_t rows = kTrainRows + 1;
  std::set<std::string> first, second, eval;
  std::vector<std::uint64_t> order1, order2;
  for (std::size_t k = 0; k < rows; ++k) {
    order1.push_back(env->trainingId(k));
    order2.push_back(env->trainingId(rows + k));
    first.insert(env->reset(order1.back()));
    second.insert(env->reset(order2.back()));
  }
  EXPECT_EQ(first.size(), rows);
  EXPECT_EQ(first, second);
  EXPECT_NE(order1, order2);
  for (std::uint64_t k = 0; k < kEvalRows; ++k) eval.insert(env->reset(env->heldOutId(k)));
  EXPECT_EQ(eval.size(), static_cast<std::size_t>(kEvalRows));
  for (const auto& prompt : eval) EXPECT_EQ(first.count(prompt), 0u) << prompt;

  // The same ids from a new environment (a resumed run, another rank): the same rows.
  auto again = makeEnvironment(f.options);
  for (std::size_t k = 0; k < rows; ++k) EXPECT_EQ(again->trainingId(rows + k), order2[k]);

  // A text row: the system prompt from the config, then the user turn, then the generation prompt.
  bool saw_text = false, saw_messages = false;
  for (std::size_t k = 0; k < rows; ++k) {
    const std::string prompt = env->reset(order1[k]);
    const auto meta = env->metadata();
    if (meta.count("tag") != 0 && meta.at("tag") == "t4") {
      saw_text = true;
      EXPECT_EQ(prompt,
                "<|im_start|>system\nAnswer with \\boxed{}.<|im_end|>\n<|im_start|>user\nWhat is 4+1?<|im_end|>\n"
                "<|im_start|>assistant\n");
      EXPECT_EQ(meta.at("level"), "1");  // a number, as its JSON text
      EXPECT_EQ(env->referenceActions(), std::vector<std::string>{"\\boxed{5}"});
      StepResult r = env->step("4+1=\\boxed{5}");
      EXPECT_TRUE(r.done);
      EXPECT_EQ(r.reward, 1.0);
      EXPECT_EQ(r.reason, "correct");
      env->reset(order1[k]);
      r = env->step("\\boxed{6}");
      EXPECT_EQ(r.reward, 0.0);
      EXPECT_EQ(r.reason, "wrong");
      env->reset(order1[k]);
      EXPECT_EQ(env->step("five").reason, "no_answer");
    } else if (meta.count("solution") != 0) {
      saw_messages = true;  // its own system message is kept, not doubled
      EXPECT_EQ(prompt,
                "<|im_start|>system\nOwn.<|im_end|>\n<|im_start|>user\nSay 7.<|im_end|>\n<|im_start|>assistant\n");
      EXPECT_EQ(env->referenceActions(), std::vector<std::string>{"It is \\boxed{7}."});
    }
  }
  EXPECT_TRUE(saw_text);
  EXPECT_TRUE(saw_messages);
  EXPECT_THROW(env->reset(std::uint64_t{1000}), Error);
}

TEST(DatasetEnvironment, RewardKindsAndTokenizer) {
  DatasetFixture f;
  f.options.reward.kind = RewardKind::Exact;
  auto env = makeEnvironment(f.options);
  env->reset(env->heldOutId(0));  // "What is 100+2?" → "102"
  EXPECT_EQ(env->step(" 102 ").reward, 1.0);
  env->reset(env->heldOutId(0));
  EXPECT_EQ(env->step("\\boxed{102}").reward, 0.0);
  EXPECT_EQ(env->referenceActions(), std::vector<std::string>{"102"});

  // The run encodes with the folder's tokenizer: ChatML specials are whole tokens.
  auto tok = makeEnvironmentTokenizer(f.options);
  EXPECT_EQ(tok->encode("<|im_end|>").size(), 1u);
  EXPECT_EQ(tok->tokenText(tok->eosId()), "<|im_end|>");
  const TokenSpec spec = tokenSpecOf(*tok);
  EXPECT_EQ(spec.bos_id, -1);
  EXPECT_EQ(spec.pad_id, *tok->tokenId("<|endoftext|>"));
  // The task vocabulary for the synthetic environments.
  EXPECT_TRUE(makeEnvironmentTokenizer(EnvironmentOptions{})->tokenId("</answer>").has_value());

  // Policies whose folders hold different tokenizers cannot share a run.
  std::filesystem::create_directories(f.dir.file("other"));
  std::filesystem::copy_file(f.dir.file("model/tokenizer.json"), f.dir.file("other/tokenizer.json"));
  f.options.dataset.tokenizer_folders.push_back(f.dir.file("other"));
  EXPECT_NO_THROW(makeEnvironmentTokenizer(f.options));
  std::ofstream(f.dir.file("other/tokenizer.json"), std::ios::app) << " ";
  EXPECT_THROW(makeEnvironmentTokenizer(f.options), Error);
}

// reward.kind code: the row's "tests" run against the response's code block in the sandbox.
TEST(DatasetEnvironment, CodeRewardRunsTheRowsTests) {
  DatasetFixture f;
  std::ofstream(f.dir.file("code.jsonl"))
      << R"({"prompt": "Print the sum of two integers read from stdin.", )"
      << R"("tests": [{"input": "2 3\n", "output": "5\n"}, {"input": "10 -4\n", "output": "6\n"}]})"
      << "\n";
  f.options.dataset.train_files = {f.dir.file("code.jsonl")};
  f.options.dataset.eval_files.clear();
  f.options.reward.kind = RewardKind::Code;
  f.options.reward.wall_seconds = 5;
  auto env = makeEnvironment(f.options);
  env->reset(env->trainingId(0));
  StepResult r = env->step("Here:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n");
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.reason, "correct");
  env->reset(env->trainingId(0));
  r = env->step("```python\nprint(5)\n```\n");  // passes one test of two
  EXPECT_EQ(r.reward, 0.5);
  EXPECT_EQ(r.reason, "wrong");
  env->reset(env->trainingId(0));
  EXPECT_EQ(env->step("no code").reason, "no_answer");
}

// The `environment` keys of the dataset environment, read by parseConfig: files made absolute,
// the policies' folders, and errors that name the key.
TEST(DatasetEnvironment, ConfigKeys) {
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  ASSERT_NE(cli, nullptr) << "ASTRAFLOW_CLI is not set";
  test::TempDir dir;
  const std::string folder = dir.file("tiny");
  ASSERT_EQ(std::system(fmt::format("{} init-model {} --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 "
                                    "--intermediate-size 32 --max-positions 64 > /dev/null",
                                    cli, folder)
                            .c_str()),
            0);
  const std::string head = fmt::format(
      "policies:\n  - name: solver\n    model: {{hf: {}}}\nlayout:\n  - {{role: dataflow}}\n"
      "  - {{role: trainer, policy: solver}}\n  - {{role: rollout, policies: [solver]}}\n",
      folder);
  const Config c = parseConfig(head +
                                   "environment:\n  name: dataset\n  train: [data/a.jsonl]\n  eval_fraction: 0.1\n"
                                   "  enable_thinking: false\n  reward: {kind: regex, pattern: 'x+'}\nrun: {seed: 9}\n",
                               "ok.yaml");
  const DatasetTaskOptions& d = c.environment.dataset;
  EXPECT_EQ(d.train_files, std::vector<std::string>{(std::filesystem::current_path() / "data/a.jsonl").string()});
  EXPECT_EQ(d.tokenizer_folders, std::vector<std::string>{c.policies[0].model.hf_path});
  EXPECT_EQ(d.seed, 9u);
  EXPECT_EQ(d.enable_thinking, "false");
  EXPECT_EQ(c.environment.reward.kind, RewardKind::Regex);

  const auto error = [&](const std::string& text) {
    try {
      parseConfig(text, "bad.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(head + "environment: {name: dataset, train: [a.jsonl]}\n").find("eval.problems"), std::string::npos);
  EXPECT_NE(error(head + "environment: {name: dataset, eval_fraction: 0.1}\n").find("environment.train"),
            std::string::npos);
  EXPECT_NE(error(head + "environment: {name: dataset, train: [a], eval: [b], eval_fraction: 0.1}\n")
                .find("environment.eval_fraction"),
            std::string::npos);
  EXPECT_NE(error(head + "environment: {name: dataset, train: [a], eval: [b], reward: {kind: chess}}\n")
                .find("environment.reward.kind"),
            std::string::npos);
  EXPECT_NE(error(head + "environment: {name: dataset, train: [a], eval: [b], reward: {kind: command}}\n")
                .find("environment.reward.command"),
            std::string::npos);
  EXPECT_NE(error(head + "environment: {name: dataset, train: [a], eval: [b], reward: {kind: regex}}\n")
                .find("environment.reward.pattern"),
            std::string::npos);
  // The verifiers that stay running (tasks/reward_worker.hpp).
  const std::string env = "environment: {name: dataset, train: [a], eval: [b], reward: ";
  const RewardSpec p =
      parseConfig(head + env + "{kind: command, command: [python3, w.py], persistent: true, max_items: 500}}\n",
                  "p.yaml")
          .environment.reward;
  EXPECT_TRUE(p.persistent);
  EXPECT_EQ(p.max_items, 500U);
  EXPECT_EQ(parseConfig(head + env + "{kind: http, url: \"http://127.0.0.1:9/r\"}}\n", "h.yaml").environment.reward.url,
            "http://127.0.0.1:9/r");
  EXPECT_NE(error(head + env + "{kind: math, persistent: true}}\n").find("environment.reward.persistent"),
            std::string::npos);
  EXPECT_NE(error(head + env + "{kind: command, command: [a], max_items: 5}}\n").find("environment.reward.max_items"),
            std::string::npos);
  EXPECT_NE(error(head + env + "{kind: http}}\n").find("environment.reward.url"), std::string::npos);
  EXPECT_NE(error(head + env + "{kind: http, url: \"https://x\"}}\n").find("environment.reward.url"),
            std::string::npos);
  EXPECT_NE(error(head + env + "{kind: rpc}}\n").find("http"), std::string::npos);  // the allowed values name it
  EXPECT_NE(error(head + "environment: {name: arithmetic, train: [a]}\n").find("environment.train"), std::string::npos);
  const std::string own = std::string(head).replace(head.find(fmt::format("{{hf: {}}}", folder)),
                                                    fmt::format("{{hf: {}}}", folder).size(), "{d_model: 16}");
  EXPECT_NE(error(own + "environment: {name: dataset, train: [a], eval: [b]}\n").find("model.hf"), std::string::npos);
}

}  // namespace
