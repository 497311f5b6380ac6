// Parameter sharding (trainer.sharding: parameters) at 1, 2 and 3 ranks, over Gloo and MPI:
// against the unsharded data-parallel group on RL steps whose ranks hold uneven work (different
// micro-batch counts, an empty rank, mini-batches, M2PO's extra pass), the same weights to float
// rounding; each rank holds 1/N of every block's weights, gradients and AdamW state (measured);
// the weight blob and the checkpoint are gathered from the shards, and both an unsharded and a
// sharded trainer resume from the checkpoint and step on alike.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "astraflow/trainer/trainer_checkpoint.hpp"

using namespace astraflow;

namespace {

ModelConfig twoBlocks() { return test_support::tinyModel(20, 16, 2, 2, 1, 32, 16); }

// Rank r's batch at step s: a rank-dependent number of sequences (none for rank 1 at step 1
// when there are peers) of rank-dependent lengths, so the ranks' micro-batch counts differ.
TrainBatch unevenBatch(int rank, int size, int step) {
  std::vector<TrainingSample> eps;
  const int count = (size > 1 && rank == 1 && step == 1) ? 0 : 2 + 2 * ((rank + step) % 3);
  std::vector<std::int64_t> groups;
  for (int i = 0; i < count; ++i) {
    TrainingSample e;
    const int length = 5 + (rank * 3 + i * 2 + step) % 8;
    for (int t = 0; t < length; ++t) e.tokens.push_back(2 + (rank * 7 + step * 3 + i * 5 + t * 11) % 18);
    e.behav_logprobs.assign(static_cast<std::size_t>(length), -3.0f);  // ≈ log(1/20): M2PO keeps most tokens
    e.policy_mask.assign(static_cast<std::size_t>(length), 0);
    for (int t = length / 2; t < length; ++t) e.policy_mask[static_cast<std::size_t>(t)] = 1;
    e.reward = static_cast<double>((i + rank + step) % 2);
    eps.push_back(e);
    groups.push_back(i / 2);
  }
  return collate(eps, groups, 0);
}

double maxDiff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

PolicyModel seededTwoBlocks() {
  torch::manual_seed(9);
  return PolicyModel(twoBlocks());
}

PolicyModel copyOf(const PolicyModel& a) {
  PolicyModel b(a->config());
  b->importTensors(a->orderedParameters());
  return b;
}

TrainerSection shardedOf(TrainerSection plain) {
  plain.sharding = TrainerSection::Sharding::Parameters;
  return plain;
}

// The same weights trained twice over `comm`: as `plain` says (a) and with parameter sharding (b).
struct TwinTrainers {
  TwinTrainers(const TrainerSection& plain, const Comm& comm)
      : a(seededTwoBlocks()), b(copyOf(a)), unsharded(a, plain, 1.0), sharded(b, shardedOf(plain), 1.0) {
    unsharded.setDataParallel(&comm);
    sharded.setDataParallel(&comm);
  }
  // The largest difference between the two trainers' weights (on rank 0, gathered from the
  // shards: collective; 0 elsewhere).
  double worstDifference(int rank) {
    const auto named = a->orderedParameters();
    double worst = 0;
    for (std::size_t i = 0; i < named.size(); ++i) {
      const auto value =
          sharded.zero() ? sharded.zero()->gatherParameter(i) : b->orderedParameters()[i].tensor.detach();
      if (rank == 0) worst = std::max(worst, maxDiff(value, named[i].tensor));
    }
    return worst;
  }
  PolicyModel a, b;
  PolicyTrainer unsharded, sharded;
};

}  // namespace

class ParameterSharding : public ::testing::TestWithParam<TrainerSection::GradSync> {};

TEST_P(ParameterSharding, MatchesUnshardedHoldsAShardAndResumes) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  const int size = comm.size(), rank = comm.rank();
  TrainerSection plain;
  plain.lr = 0.01;
  plain.grad_sync = GetParam();
  plain.ppo_epochs = 2;
  plain.mini_batches = 2;
  plain.micro_batch_tokens = 20;  // 1 to 4 micro-batches per step, unevenly over the ranks
  plain.loss.kind = LossKind::Decoupled;
  plain.loss.m2po = true;  // a split step's extra pass at the current weights
  TrainerSection sharded = plain;
  sharded.sharding = TrainerSection::Sharding::Parameters;
  torch::manual_seed(8);
  PolicyModel a(twoBlocks());
  PolicyModel b(a->config());
  b->importTensors(a->orderedParameters());
  const auto initial = a->orderedParameters();
  std::vector<torch::Tensor> initial_values;
  for (const auto& p : initial) initial_values.push_back(p.tensor.detach().clone());
  PolicyTrainer unsharded_trainer(a, plain, 1.0), fsdp_trainer(b, sharded, 1.0);
  unsharded_trainer.setDataParallel(&comm);
  fsdp_trainer.setDataParallel(&comm);
  ASSERT_EQ(fsdp_trainer.zero() != nullptr, size > 1);
  if (size > 1) {
    ASSERT_TRUE(fsdp_trainer.zero()->shardsParameters());
    EXPECT_STREQ(fsdp_trainer.gradSyncBackend(), GetParam() == TrainerSection::GradSync::Mpi ? "mpi" : "gloo");
    // Between passes the blocks' weights are not held: the model's tensors are empty.
    for (int l = 0; l < 2; ++l) {
      for (const auto& p : b->blockParameters(static_cast<std::size_t>(l))) EXPECT_EQ(p.numel(), 0);
    }
    // The shards hold the only copy of the blocks: sharding again is refused, before any collective.
    EXPECT_THROW(fsdp_trainer.setDataParallel(&comm), Error);
  }
  for (int step = 0; step < 3; ++step) {
    unsharded_trainer.rlStep(unevenBatch(rank, size, step));
    fsdp_trainer.rlStep(unevenBatch(rank, size, step));
  }
  EXPECT_EQ(fsdp_trainer.optimizerSteps(), unsharded_trainer.optimizerSteps());
  EXPECT_EQ(fsdp_trainer.skippedSteps(), 0);
  // Every weight, whole on rank 0 (gathered from the shards: collective).
  auto fullValue = [&](std::size_t i) {
    return fsdp_trainer.zero() ? fsdp_trainer.zero()->gatherParameter(i) : b->orderedParameters()[i].tensor.detach();
  };
  const auto named = a->orderedParameters();
  double worst = 0, moved = 0;
  std::vector<torch::Tensor> gathered;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto value = fullValue(i);
    gathered.push_back(value);
    if (rank != 0) continue;
    worst = std::max(worst, maxDiff(value, named[i].tensor));
    moved = std::max(moved, maxDiff(value, initial_values[i]));
  }
  if (rank == 0) {
    EXPECT_LT(worst, 2e-5) << "parameter-sharded training differs from the unsharded group";
    EXPECT_GT(moved, 1e-3) << "no training happened";
  }

  // Memory: AdamW state and the weights and gradients held between steps. The root unit
  // (embeddings, final norm) is whole on every rank; each block a ceil(numel / N) part.
  const auto params = static_cast<std::uint64_t>(a->parameterCount());
  std::uint64_t block_parts = 0, block_total = 0;
  for (int l = 0; l < 2; ++l) {
    std::uint64_t n = 0;
    for (const auto& p : a->blockParameters(static_cast<std::size_t>(l))) n += static_cast<std::uint64_t>(p.numel());
    block_total += n;
    block_parts += (n + size - 1) / size;
  }
  const std::uint64_t root = params - block_total, root_part = (root + size - 1) / size;
  if (size > 1) {
    EXPECT_EQ(fsdp_trainer.optimizerStateBytes(), 8 * (root_part + block_parts)) << "rank " << rank;
    EXPECT_EQ(fsdp_trainer.zero()->residentBytes(), 8 * (root_part * size + block_parts)) << "rank " << rank;
    EXPECT_LT(fsdp_trainer.zero()->residentBytes(), 8 * params);
  }
  EXPECT_EQ(unsharded_trainer.optimizerStateBytes(), 8 * params);

  // The weight-store blob from the shards: rank 0's unpacks to the gathered weights in bf16.
  std::vector<std::byte> blob;
  fsdp_trainer.packWeights(blob);
  if (rank == 0) {
    PolicyModel e(twoBlocks());
    unpackWeights(blob, *e);
    for (std::size_t i = 0; i < named.size(); ++i) {
      EXPECT_TRUE(e->orderedParameters()[i].tensor.equal(gathered[i].to(torch::kBFloat16).to(torch::kFloat32)))
          << named[i].name;
    }
  } else {
    EXPECT_TRUE(blob.empty());
  }

  // The checkpoint, written by rank 0 from the shards; resumed sharded and unsharded, then one
  // more step each: the same weights as the original sharded trainer after that step.
  const std::string path = ::testing::TempDir() + "fsdp_" + std::to_string(size) + "_" +
                           std::to_string(static_cast<int>(GetParam())) + ".h5";
  saveTrainerCheckpoint(path, "solver", fsdp_trainer, 3);
  comm.barrier();
  // The size the trainer checks its filesystem for (every rank computes it; rank 0 acts on it)
  // bounds the file gathered from the shards.
  EXPECT_GE(trainerCheckpointBytes(fsdp_trainer), std::filesystem::file_size(path)) << "rank " << rank;
  PolicyModel c(twoBlocks()), d(twoBlocks());
  PolicyTrainer resumed_fsdp(c, sharded, 1.0), resumed_plain(d, plain, 1.0);
  resumed_fsdp.setDataParallel(&comm);
  resumed_plain.setDataParallel(&comm);
  EXPECT_EQ(loadTrainerCheckpoint(path, "solver", resumed_fsdp), 3);
  EXPECT_EQ(loadTrainerCheckpoint(path, "solver", resumed_plain), 3);
  EXPECT_EQ(resumed_fsdp.optimizerSteps(), fsdp_trainer.optimizerSteps());
  EXPECT_EQ(resumed_plain.optimizerSteps(), fsdp_trainer.optimizerSteps());
  fsdp_trainer.rlStep(unevenBatch(rank, size, 3));
  resumed_fsdp.rlStep(unevenBatch(rank, size, 3));
  resumed_plain.rlStep(unevenBatch(rank, size, 3));
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto want = fullValue(i);
    const auto resumed =
        resumed_fsdp.zero() ? resumed_fsdp.zero()->gatherParameter(i) : c->orderedParameters()[i].tensor.detach();
    if (rank != 0) continue;
    EXPECT_TRUE(resumed.equal(want)) << named[i].name;
    EXPECT_TRUE(d->orderedParameters()[i].tensor.allclose(want, 1e-5, 1e-6)) << named[i].name;
  }
  comm.barrier();
  if (rank == 0) std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Transport, ParameterSharding,
                         ::testing::Values(TrainerSection::GradSync::C10d, TrainerSection::GradSync::Mpi),
                         [](const auto& p) {
                           return std::string(p.param == TrainerSection::GradSync::Mpi ? "mpi" : "gloo");
                         });

// The KL penalty's reference under parameter sharding, sharded as the model is (its blocks
// gathered from the group for each pass, never whole on a rank between passes): the same KL and
// the same weights as the unsharded group's, with uneven work and an empty rank. At one rank the
// reference is made at the first step.
TEST(ParameterShardingKl, TheReferenceIsShardedAndTrainsAsUnsharded) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  const int size = comm.size(), rank = comm.rank();
  TrainerSection plain;
  plain.lr = 0.01;
  plain.ppo_epochs = 2;
  plain.micro_batch_tokens = 20;
  plain.loss.kl_coef = 0.5;
  TwinTrainers twins(plain, comm);
  auto &unsharded_trainer = twins.unsharded, &fsdp_trainer = twins.sharded;
  if (size > 1) {
    ASSERT_TRUE(fsdp_trainer.reference());
    for (int l = 0; l < 2; ++l) {
      for (const auto& p : fsdp_trainer.reference()->blockParameters(static_cast<std::size_t>(l)))
        EXPECT_EQ(p.numel(), 0);
    }
  }
  double kl_plain = 0, kl_fsdp = 0;
  for (int step = 0; step < 3; ++step) {
    kl_plain += unsharded_trainer.rlStep(unevenBatch(rank, size, step)).kl;
    kl_fsdp += fsdp_trainer.rlStep(unevenBatch(rank, size, step)).kl;
  }
  EXPECT_GT(kl_plain, 1e-7) << "the policy never left its reference: the test shows nothing";
  EXPECT_NEAR(kl_fsdp, kl_plain, 1e-5 * std::max(1.0, kl_plain)) << "rank " << rank;
  const double worst = twins.worstDifference(rank);
  if (rank == 0) {
    EXPECT_LT(worst, 2e-5) << "a sharded KL reference trains otherwise than the unsharded one";
  }
}

// Under bf16 autocast: the gathered weights cast in each pass (the sharded blocks' casts are
// not cached) and the recomputing backward under the forward's autocast state. Two RL steps
// match the unsharded group's (measured 1.2e-7).
TEST(ParameterShardingBf16, MatchesUnshardedUnderAutocast) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  const int size = comm.size(), rank = comm.rank();
  TrainerSection plain;
  plain.lr = 0.01;
  plain.grad_sync = TrainerSection::GradSync::Mpi;
  plain.compute.precision = Precision::Bf16;
  plain.mini_batches = 2;
  TwinTrainers twins(plain, comm);
  auto &unsharded_trainer = twins.unsharded, &fsdp_trainer = twins.sharded;
  for (int step = 0; step < 2; ++step) {
    unsharded_trainer.rlStep(unevenBatch(rank, size, step));
    fsdp_trainer.rlStep(unevenBatch(rank, size, step));
  }
  const double worst = twins.worstDifference(rank);
  if (rank == 0) {
    EXPECT_LT(worst, 1e-4) << "parameter-sharded training under bf16 differs from the unsharded group";
  }
}
