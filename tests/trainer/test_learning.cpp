// Learning, small and fast: a warm-started policy improves its held-out greedy accuracy
// under train-local (GRPO) on the search task. No wall-clock assertion; the full-size
// figures live in docs/learning.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "astraflow/core/config.hpp"
#include "astraflow/run/local_loop.hpp"

using namespace astraflow;

TEST(Learning, TrainLocalRaisesHeldOutAccuracyFromSft) {
  char tmpl[] = "/tmp/astraflow_learning_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string yaml = R"(run: {name: learn, seed: 3, threads_per_rank: 1, output_dir: )" + dir + R"(}
policies:
  - name: solver
    model: {d_model: 48, layers: 2, heads: 4, kv_heads: 2, ffn_hidden: 128, max_seq_len: 64}
layout:
  - {role: dataflow}
  - {role: trainer, policy: solver}
  - {role: rollout, policies: [solver]}
environment: {name: search, corpus_size: 2000, max_turns: 3}
rollout: {group_size: 8, temperature: 0.7, max_new_tokens: 8}
trainer: {lr: 0.0003, groups_per_step: 16}
sft: {max_steps: 400, batch_size: 32, lr: 0.003, target_accuracy: 0.3, eval_every: 10}
eval: {problems: 150, every: 10}
local: {steps: 60, max_wall_seconds: 0}
)";
  const Config cfg = parseConfig(yaml, "learning.yaml");
  const LocalRunResult sft = runSft(cfg);
  EXPECT_GT(sft.eval_accuracy_end, sft.eval_accuracy_start) << "SFT did not learn";
  ASSERT_TRUE(std::filesystem::exists(cfg.sft.checkpoint));
  const LocalRunResult rl = runTrainLocal(cfg);
  EXPECT_EQ(rl.checkpoint, cfg.sft.checkpoint) << "train-local must start from the SFT checkpoint";
  EXPECT_NEAR(rl.eval_accuracy_start, sft.eval_accuracy_end, 1e-9) << "warm start must reproduce the SFT policy";
  EXPECT_GT(rl.eval_accuracy_end, rl.eval_accuracy_start + 0.05)
      << "GRPO did not raise held-out accuracy: " << rl.eval_accuracy_start << " -> " << rl.eval_accuracy_end;
  EXPECT_EQ(rl.steps, 60);
  std::filesystem::remove_all(dir);
}
