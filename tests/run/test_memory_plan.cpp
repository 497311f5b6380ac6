// The memory plan's rollout items against the node-shared weights (docs/memory.md): a policy's
// node copy is counted once per node — on the node's first rollout rank, two slots for a node of
// several ranks, one for a rank alone — and a bf16 engine on the CPU, which computes from that
// copy in place, holds no weights of its own, while an fp32 engine does; an fp32 engine with
// rollout.prepacked_weights also holds the packed copy MKL says its products take. Node-shared
// items are left out of a rank's private total, which is what its sampled private peak meets.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/model/prepacked_weights.hpp"
#include "astraflow/run/memory_plan.hpp"
#include "astraflow/run/private_memory_peak.hpp"

namespace astraflow {
namespace {

// One dataflow rank, `trainers` trainer ranks and `rollouts` rollout ranks of a policy with this model.
std::string planYaml(const std::string& model, int rollouts, int trainers = 1) {
  return "policies:\n  - name: solver\n    model: " + model +
         "\nlayout:\n  - {role: dataflow, ranks: 1}\n  - {role: trainer, policy: solver, ranks: " +
         std::to_string(trainers) + "}\n  - {role: rollout, policies: [solver], ranks: " + std::to_string(rollouts) +
         "}\n";
}

Config threeRollouts(const std::string& precision) {
  return parseConfig(planYaml("{d_model: 64, layers: 2, heads: 2, kv_heads: 1, ffn_hidden: 128, max_seq_len: 64}", 3) +
                         "rollout: {precision: " + precision + "}\n",
                     "test_memory_plan");
}

std::uint64_t item(const RankMemoryPlan& plan, const std::string& starts) {
  std::uint64_t sum = 0;
  for (const auto& i : plan.items) {
    if (i.what.rfind(starts, 0) == 0) sum += i.bytes;
  }
  return sum;
}

TEST(MemoryPlan, TheNodeCopyIsCountedOncePerNode) {
  const Config cfg = threeRollouts("bf16");
  const RoleMap map(cfg, cfg.layoutRanks());
  const auto P = static_cast<std::uint64_t>(parameterCount(cfg.policies.front().model, 1000));
  // World ranks 2, 3, 4 are the rollout ranks. All on one node: one copy of two slots, on rank 2.
  auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30);
  EXPECT_EQ(item(plans[2], "node-shared version"), 2 * 2 * P);
  EXPECT_EQ(item(plans[3], "node-shared version"), 0u);
  EXPECT_EQ(item(plans[4], "node-shared version"), 0u);
  // Ranks 2 and 3 on node 0, rank 4 alone on node 1: two slots there, one slot here.
  plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30, {0, 0, 0, 0, 1});
  EXPECT_EQ(item(plans[2], "node-shared version"), 2 * 2 * P);
  EXPECT_EQ(item(plans[3], "node-shared version"), 0u);
  EXPECT_EQ(item(plans[4], "node-shared version"), 2 * P);
}

// weights.relay_fanout in delta mode: a node with child nodes in the relay's tree also holds the
// ring of the deltas it applied, for them (a quarter of a version), beside its copy; a leaf node
// does not, and nothing does in full mode.
TEST(MemoryPlan, RelayedDeltasAreCountedOnNodesWithChildren) {
  const std::string model = "{d_model: 64, layers: 2, heads: 2, kv_heads: 1, ffn_hidden: 128, max_seq_len: 64}";
  for (const char* mode : {"delta", "full"}) {
    const Config cfg =
        parseConfig(planYaml(model, 3) + "weights: {mode: " + mode + ", relay_fanout: 2}\n", "test_memory_plan");
    const RoleMap map(cfg, cfg.layoutRanks());
    const auto P = static_cast<std::uint64_t>(parameterCount(cfg.policies.front().model, 1000));
    // Ranks 2 and 3 on node 0 (the tree's root), rank 4 alone on node 1 (a leaf).
    auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30, {0, 0, 0, 0, 1});
    const std::uint64_t ring = std::string(mode) == "delta" ? 2 * P / 4 : 0;
    EXPECT_EQ(item(plans[2], "relayed deltas"), ring) << mode;
    EXPECT_EQ(item(plans[3], "relayed deltas"), 0u) << mode << ": counted once per node";
    EXPECT_EQ(item(plans[4], "relayed deltas"), 0u) << mode << ": a leaf keeps none";
    // Three nodes of one rank each, fanout 2: the root has both others as children.
    plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30, {0, 0, 0, 1, 2});
    EXPECT_EQ(item(plans[2], "relayed deltas"), ring) << mode;
    EXPECT_EQ(item(plans[3], "relayed deltas"), 0u) << mode;
    EXPECT_EQ(item(plans[4], "relayed deltas"), 0u) << mode;
  }
}

TEST(MemoryPlan, OnlyAnEngineThatCopiesTheVersionHoldsWeightsOfItsOwn) {
  for (const std::string precision : {"bf16", "fp32"}) {
    const Config cfg = threeRollouts(precision);
    const RoleMap map(cfg, cfg.layoutRanks());
    const auto P = static_cast<std::uint64_t>(parameterCount(cfg.policies.front().model, 1000));
    const auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30);
    for (int r = 2; r <= 4; ++r) {
      EXPECT_EQ(item(plans[static_cast<std::size_t>(r)], "engine weights"), precision == "bf16" ? 0 : 4 * P)
          << precision << " rank " << r;
    }
  }
}

TEST(MemoryPlan, PackedWeightsAreCountedOnFp32EnginesThatAskForThem) {
  const std::string wide =
      planYaml("{d_model: 1024, layers: 1, heads: 16, kv_heads: 8, ffn_hidden: 3072, max_seq_len: 64}", 1);
  auto model = parseConfig(wide, "test_memory_plan").policies.front().model;
  model.vocab_size = 1000;
  const std::uint64_t packed = prepackedWeightBytes(model);
  for (const std::string rollout : {"{precision: fp32, prepacked_weights: true}", "{precision: fp32}",
                                    "{precision: bf16, prepacked_weights: true}"}) {
    const Config cfg = parseConfig(wide + "rollout: " + rollout + "\n", "test_memory_plan");
    const RoleMap map(cfg, cfg.layoutRanks());
    const auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30);
    const bool counted = rollout == "{precision: fp32, prepacked_weights: true}";
    EXPECT_EQ(item(plans[2], "prepacked engine weights"), counted ? packed : 0u) << rollout;
    EXPECT_EQ(item(plans[1], "prepacked engine weights"), 0u) << "the trainer never packs";
  }
}

// Per rank, the plan is compared with the private resident set (docs/memory.md): the store's
// windows, the rings, the node's weight copy and library code are shared by the node's ranks,
// counted in the node's sum but not in the private total of the rank that holds them.
TEST(MemoryPlan, NodeSharedItemsAreLeftOutOfTheRanksPrivateTotal) {
  const Config cfg = threeRollouts("bf16");
  const RoleMap map(cfg, cfg.layoutRanks());
  const auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30);
  const auto shared = [](const RankMemoryPlan& p) { return p.total() - p.privateTotal(); };
  const auto code = [](const RankMemoryPlan& p) { return item(p, "process: library code"); };
  for (const auto& p : plans) {
    EXPECT_GT(code(p), 0u) << p.label;
    EXPECT_GT(item(p, "process: heap"), 0u) << p.label;
  }
  // The dataflow rank: the store and the rings are shared.
  EXPECT_EQ(shared(plans[0]), code(plans[0]) + item(plans[0], "weight store") + item(plans[0], "rings"));
  EXPECT_GT(item(plans[0], "weight store"), 0u);
  // The trainer holds nothing else shared; the node copy is shared on the rank that counts it.
  EXPECT_EQ(shared(plans[1]), code(plans[1]));
  EXPECT_EQ(shared(plans[2]), code(plans[2]) + item(plans[2], "node-shared version"));
  EXPECT_GT(item(plans[2], "node-shared version"), 0u);
  EXPECT_EQ(shared(plans[3]), code(plans[3]));
}

// Only a group's first rank stages the packed version it publishes; the others send their shards.
TEST(MemoryPlan, OnlyTheGroupsFirstRankStagesTheVersion) {
  const std::string yaml =
      planYaml("{d_model: 64, layers: 2, heads: 2, kv_heads: 1, ffn_hidden: 128, max_seq_len: 64}", 1, 2);
  const Config cfg = parseConfig(yaml + "trainer: {sharding: parameters, loss: {kl_coef: 0.1}}\n", "test_memory_plan");
  const RoleMap map(cfg, cfg.layoutRanks());
  const auto P = static_cast<std::uint64_t>(parameterCount(cfg.policies.front().model, 1000));
  const auto plans = planMemory(cfg, map, 1000, std::uint64_t{16} << 30);
  ASSERT_EQ(plans[1].label, "trainer:solver");
  ASSERT_EQ(plans[2].label, "trainer:solver");
  EXPECT_EQ(item(plans[1], "weight publishing"), 2 * P);
  EXPECT_EQ(item(plans[2], "weight publishing"), 0u);
  EXPECT_EQ(item(plans[2], "AdamW state"), 8 * P / 2);  // sharded over the two
  // The blocks are split; the embedding (tied head) and final norm stay whole on each rank.
  const std::uint64_t outside = 1000 * 64 + 64;
  EXPECT_EQ(item(plans[2], "weights (fp32"), 4 * ((P - outside) / 2 + outside));
  EXPECT_EQ(item(plans[2], "gradients (fp32"), 4 * ((P - outside) / 2 + outside));
  EXPECT_EQ(item(plans[2], "KL reference"), 4 * ((P - outside) / 2 + outside));  // sharded as the weights
}

// The trainer's activations per token: linear in the context under sdpa (no mask, a log-sum-exp
// per head), quadratic under eager (probabilities and mask of `width` keys per head).
TEST(MemoryPlan, ActivationsGrowWithTheContextOnlyUnderEagerAttention) {
  const auto activations = [](const std::string& attention, int width) {
    const Config cfg = parseConfig(planYaml("{d_model: 64, layers: 2, heads: 4, kv_heads: 2, ffn_hidden: 128, "
                                            "max_seq_len: " +
                                                std::to_string(width) + ", attention: " + attention + "}",
                                            1) +
                                       "trainer: {micro_batch_tokens: 512}\n",
                                   "test_memory_plan");
    const RoleMap map(cfg, cfg.layoutRanks());
    return item(planMemory(cfg, map, 1000, std::uint64_t{16} << 30)[1], "activations");
  };
  EXPECT_EQ(activations("sdpa", 4096), activations("sdpa", 32768));
  // eager: 512 tokens × 2 layers × 4 bytes × 2 × 4 heads × (32768 − 4096) more.
  EXPECT_EQ(activations("eager", 32768) - activations("eager", 4096), 512ULL * 2 * 4 * 2 * 4 * (32768 - 4096));
  EXPECT_GT(activations("eager", 4096), activations("sdpa", 4096));
}

// The sampled peak sees a transient that is gone by the time it is read, and the current private
// size falls back after it: VmHWM would see it too, but counts shared pages as well.
TEST(PrivateMemoryPeak, KeepsATransientThatIsFreedBeforeItIsRead) {
  const PrivateMemoryPeak peak(std::chrono::milliseconds(10));
  const std::uint64_t before = currentPrivateBytes();
  ASSERT_GT(before, 0u);
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  {
    std::vector<char> transient(kBytes);
    for (std::size_t i = 0; i < kBytes; i += 4096) transient[i] = static_cast<char>(i);  // every page touched
    std::this_thread::sleep_for(std::chrono::milliseconds(100));                         // several samples
    EXPECT_GE(currentPrivateBytes(), before + kBytes * 9 / 10);
  }
  EXPECT_LT(currentPrivateBytes(), before + kBytes / 2);  // freed: a mapping this size goes back to the system
  EXPECT_GE(peak.peakBytes(), before + kBytes * 9 / 10);
}

}  // namespace
}  // namespace astraflow
