// Data-parallel trainer group at 2 and 3 ranks: each rank trains on its own batches, the
// group averages gradients, and after several steps every rank holds bit-identical weights
// that match a single-process run on the union of the batches (within float tolerance).
#include <gtest/gtest.h>

#include <xxhash.h>
#include "test_model_config.hpp"

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "astraflow/trainer/trainer_checkpoint.hpp"

using namespace astraflow;

namespace {

ModelConfig tiny() { return test_support::tinyModel(20, 16, 1, 2, 1, 32, 16); }

// Rank r's batch at step s: 4 sequences of 6 tokens, the policy trains on the last 2.
// Equal token counts on every rank make the mean of per-rank token-means equal the
// token-mean over the union.
std::vector<TrainingSample> batchOf(int rank, int step) {
  std::vector<TrainingSample> out;
  for (int i = 0; i < 4; ++i) {
    TrainingSample e;
    for (int t = 0; t < 6; ++t) e.tokens.push_back(2 + (rank * 7 + step * 3 + i * 5 + t * 11) % 18);
    e.behav_logprobs.assign(6, 0.0f);
    e.policy_mask = {0, 0, 0, 0, 1, 1};
    out.push_back(e);
  }
  return out;
}

std::uint64_t weightsHash(PolicyModelImpl& m) {
  std::uint64_t h = 0;
  for (const auto& p : m.orderedParameters()) {
    const auto c = p.tensor.detach().contiguous();
    h = XXH3_64bits_withSeed(c.data_ptr<float>(), c.numel() * sizeof(float), h);
  }
  return h;
}

}  // namespace

// Every trainer.grad_sync: the c10d Gloo process group, MPI, and auto (MPI on the CPU); and
// ZeRO-1 (trainer.sharding: optimizer) over Gloo.
struct Sync {
  TrainerSection::GradSync grad_sync;
  TrainerSection::Sharding sharding;
  const char* name;
};
void PrintTo(const Sync& s, std::ostream* os) { *os << s.name; }

class DataParallel : public ::testing::TestWithParam<Sync> {};

TEST_P(DataParallel, RanksStayBitIdenticalAndMatchTheUnionBatch) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  const int size = comm.size(), rank = comm.rank();
  TrainerSection cfg;
  cfg.lr = 0.01;
  cfg.grad_sync = GetParam().grad_sync;
  cfg.sharding = GetParam().sharding;
  torch::manual_seed(5);
  PolicyModel model(tiny());
  PolicyTrainer trainer(model, cfg, 1.0);
  trainer.setDataParallel(&comm);
  // auto on the CPU is MPI.
  const bool c10d = GetParam().grad_sync == TrainerSection::GradSync::C10d;
  const std::string expected = size == 1 ? "none" : c10d ? "gloo" : "mpi";
  EXPECT_EQ(trainer.gradSyncBackend(), expected);
  const std::uint64_t initial = weightsHash(*model);

  // Reference on rank 0: one process, the union of every rank's batch each step.
  torch::manual_seed(5);
  PolicyModel reference(tiny());
  PolicyTrainer ref_trainer(reference, cfg, 1.0);

  constexpr int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    trainer.sftStep(collate(batchOf(rank, step), {}, 0), cfg.lr);
    if (rank == 0) {
      std::vector<TrainingSample> all;
      for (int r = 0; r < size; ++r) {
        for (auto& e : batchOf(r, step)) all.push_back(e);
      }
      ref_trainer.sftStep(collate(all, {}, 0), cfg.lr);
    }
  }
  auto sameEverywhere = [&](const char* when) {
    const std::uint64_t mine = weightsHash(*model);
    EXPECT_NE(mine, initial) << "no training happened";
    std::vector<std::uint64_t> all(size);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.raw());
    for (int r = 0; r < size; ++r) EXPECT_EQ(all[r], all[0]) << when << ": rank " << r << " weights differ from rank 0";
  };
  sameEverywhere("after 4 steps");
  if (rank == 0) {
    // The group's averaged gradient equals the union batch's gradient up to float summation order.
    double max_diff = 0;
    for (std::size_t i = 0; i < model->orderedParameters().size(); ++i) {
      max_diff = std::max(
          max_diff,
          (model->orderedParameters()[i].tensor - reference->orderedParameters()[i].tensor).abs().max().item<double>());
    }
    EXPECT_LT(max_diff, 1e-5) << "data-parallel training differs from the union-batch run";
  }
  // A rank with nothing to train on still joins the step (zero gradients): no hang, and the
  // weights stay identical.
  trainer.sftStep(collate(rank == size - 1 ? std::vector<TrainingSample>{} : batchOf(rank, 9), {}, 0), cfg.lr);
  sameEverywhere("after a step with an empty rank");
  // NaN on one rank (its final norm poisoned for one step: NaN logits, loss and gradients)
  // makes every rank skip the step alike.
  const auto before = weightsHash(*model);
  const auto skipped = trainer.skippedSteps();
  torch::Tensor norm = model->orderedParameters().back().tensor;  // the final norm (tied embeddings)
  ASSERT_EQ(model->orderedParameters().back().name, "model.norm.weight");
  const float kept = norm[0].item<float>();
  if (rank == 0) {
    torch::NoGradGuard ng;
    norm[0] = std::numeric_limits<float>::quiet_NaN();
  }
  trainer.sftStep(collate(batchOf(rank, 10), {}, 0), cfg.lr);
  if (rank == 0) {
    torch::NoGradGuard ng;
    norm[0] = kept;
  }
  EXPECT_EQ(trainer.skippedSteps(), skipped + 1) << "rank " << rank;
  EXPECT_EQ(weightsHash(*model), before) << "rank " << rank;
  sameEverywhere("after a step skipped for NaN");
  comm.barrier();
}

INSTANTIATE_TEST_SUITE_P(
    GradSync, DataParallel,
    ::testing::Values(Sync{TrainerSection::GradSync::C10d, TrainerSection::Sharding::None, "c10d"},
                      Sync{TrainerSection::GradSync::Mpi, TrainerSection::Sharding::None, "mpi"},
                      Sync{TrainerSection::GradSync::Auto, TrainerSection::Sharding::None, "auto"},
                      Sync{TrainerSection::GradSync::C10d, TrainerSection::Sharding::Optimizer, "zero1_gloo"},
                      Sync{TrainerSection::GradSync::Auto, TrainerSection::Sharding::Optimizer, "zero1_auto_mpi"}),
    [](const auto& p) { return std::string(p.param.name); });

// ZeRO-1 against the unsharded group on RL steps: the same weights to float rounding, each
// rank's AdamW state a 1/N shard (measured), and a checkpoint that holds the full state — an
// unsharded trainer and a sharded one both resume from it and step on as the original does.
// Over both transports: c10d Gloo and MPI.
class Zero1 : public ::testing::TestWithParam<TrainerSection::GradSync> {};

TEST_P(Zero1, MatchesUnshardedWithAShardOfTheStateAndResumes) {
  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  const int size = comm.size(), rank = comm.rank();
  TrainerSection plain;
  plain.lr = 0.01;
  plain.grad_sync = GetParam();
  plain.ppo_epochs = 2;
  TrainerSection sharded = plain;
  sharded.sharding = TrainerSection::Sharding::Optimizer;
  torch::manual_seed(6);
  PolicyModel a(tiny());
  PolicyModel b(a->config());
  b->importTensors(a->orderedParameters());
  const std::uint64_t initial = weightsHash(*a);
  PolicyTrainer unsharded_trainer(a, plain, 1.0), zero_trainer(b, sharded, 1.0);
  unsharded_trainer.setDataParallel(&comm);
  zero_trainer.setDataParallel(&comm);
  ASSERT_EQ(zero_trainer.zero() != nullptr, size > 1);
  if (size > 1) {
    EXPECT_STREQ(zero_trainer.gradSyncBackend(), GetParam() == TrainerSection::GradSync::Mpi ? "mpi" : "gloo");
  }
  auto rlBatch = [&](int step) {
    auto eps = batchOf(rank, step);
    for (std::size_t i = 0; i < eps.size(); ++i) eps[i].reward = static_cast<double>((i + rank + step) % 2);
    return collate(eps, {0, 0, 1, 1}, 0);
  };
  for (int step = 0; step < 3; ++step) {
    unsharded_trainer.rlStep(rlBatch(step));
    zero_trainer.rlStep(rlBatch(step));
  }
  double worst = 0;
  for (std::size_t i = 0; i < a->orderedParameters().size(); ++i)
    worst = std::max(worst,
                     (a->orderedParameters()[i].tensor - b->orderedParameters()[i].tensor).abs().max().item<double>());
  EXPECT_LT(worst, 1e-5) << "rank " << rank;
  EXPECT_NE(weightsHash(*b), initial) << "no training happened";
  const auto full = unsharded_trainer.optimizerStateBytes();
  const auto shard = zero_trainer.optimizerStateBytes();
  EXPECT_GT(full, 0u);
  // 2 fp32 tensors over ceil(parameters / N) elements.
  const auto params = static_cast<std::uint64_t>(a->parameterCount());
  EXPECT_EQ(shard, 8 * ((params + size - 1) / size)) << "rank " << rank;
  EXPECT_EQ(full, 8 * params);

  // The checkpoint: written by rank 0 from every shard (collective), the unsharded format.
  const std::string path = ::testing::TempDir() + "zero1_" + std::to_string(size) + ".h5";
  saveTrainerCheckpoint(path, "solver", zero_trainer, 3);
  comm.barrier();
  // Resumed sharded and unsharded, then one more step each: the same weights as the original
  // sharded trainer after that step.
  PolicyModel c(tiny()), d(tiny());
  PolicyTrainer resumed_zero(c, sharded, 1.0), resumed_plain(d, plain, 1.0);
  resumed_zero.setDataParallel(&comm);
  resumed_plain.setDataParallel(&comm);
  EXPECT_EQ(loadTrainerCheckpoint(path, "solver", resumed_zero), 3);
  EXPECT_EQ(loadTrainerCheckpoint(path, "solver", resumed_plain), 3);
  EXPECT_EQ(resumed_zero.optimizerSteps(), zero_trainer.optimizerSteps());
  EXPECT_EQ(resumed_plain.optimizerSteps(), zero_trainer.optimizerSteps());
  zero_trainer.rlStep(rlBatch(3));
  resumed_zero.rlStep(rlBatch(3));
  resumed_plain.rlStep(rlBatch(3));
  for (std::size_t i = 0; i < b->orderedParameters().size(); ++i) {
    const auto& want = b->orderedParameters()[i].tensor;
    EXPECT_TRUE(c->orderedParameters()[i].tensor.equal(want)) << b->orderedParameters()[i].name;
    EXPECT_TRUE(d->orderedParameters()[i].tensor.allclose(want, 1e-5, 1e-6)) << b->orderedParameters()[i].name;
  }
  comm.barrier();
  if (rank == 0) std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Transport, Zero1,
                         ::testing::Values(TrainerSection::GradSync::C10d, TrainerSection::GradSync::Mpi),
                         [](const auto& p) {
                           return std::string(p.param == TrainerSection::GradSync::Mpi ? "mpi" : "gloo");
                         });
