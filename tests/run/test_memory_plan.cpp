// The memory plan's rollout items against the node-shared weights (docs/memory.md): a policy's
// node copy is counted once per node — on the node's first rollout rank, two slots for a node of
// several ranks, one for a rank alone — and a bf16 engine on the CPU, which computes from that
// copy in place, holds no weights of its own, while an fp32 engine does; an fp32 engine with
// rollout.prepacked_weights also holds the packed copy MKL says its products take.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/layout.hpp"
#include "astraflow/model/prepacked_weights.hpp"
#include "astraflow/run/memory_plan.hpp"

namespace astraflow {
namespace {

// One dataflow rank, one trainer and `rollouts` rollout ranks of a policy with this model.
std::string planYaml(const std::string& model, int rollouts) {
  return "policies:\n  - name: solver\n    model: " + model +
         "\nlayout:\n  - {role: dataflow, ranks: 1}\n  - {role: trainer, policy: solver, ranks: 1}\n"
         "  - {role: rollout, policies: [solver], ranks: " +
         std::to_string(rollouts) + "}\n";
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

}  // namespace
}  // namespace astraflow
