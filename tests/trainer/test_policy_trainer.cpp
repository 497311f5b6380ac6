// PolicyTrainer on episodes: NaN/inf rewards and NaN-logit samples are dropped and counted,
// the step stays finite, and an RL step moves probability toward rewarded tokens.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_model_config.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "astraflow/trainer/lr_schedule.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "astraflow/trainer/trainer_checkpoint.hpp"

using namespace astraflow;

namespace {

ModelConfig tiny() { return test_support::tinyModel(12, 16, 1, 2, 1, 32, 16); }

// Prompt [1, 5] then one policy token.
TrainingSample episode(std::int32_t action, double reward) {
  TrainingSample e;
  e.tokens = {1, 5, action};
  e.behav_logprobs = {0.f, 0.f, 0.f};
  e.policy_mask = {0, 0, 1};
  e.reward = reward;
  return e;
}

}  // namespace

TEST(PolicyTrainer, NonFiniteSamplesAreDroppedAndCounted) {
  std::vector<TrainingSample> eps{episode(7, 1.0), episode(8, std::numeric_limits<double>::quiet_NaN()),
                                  episode(9, 0.0), episode(7, std::numeric_limits<double>::infinity())};
  eps.push_back(episode(8, 1.0));
  eps.back().nonfinite = true;
  const TrainBatch b = collate(eps, {0, 0, 0, 0, 0}, 0);
  EXPECT_EQ(b.dropped, 3);
  EXPECT_EQ(b.tokens.size(0), 2);
  EXPECT_EQ(b.tokens[1][2].item<std::int64_t>(), 9);

  torch::manual_seed(1);
  PolicyModel model(tiny());
  TrainerSection t;
  PolicyTrainer trainer(model, t, 1.0);
  const RlStepStats s = trainer.rlStep(b);
  EXPECT_TRUE(std::isfinite(s.loss));
  EXPECT_EQ(s.dropped, 3);
  for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

// Steps with trainer.precision fp32 (the CPU default) and bf16 (autocast, as on a GPU).
class PolicyTrainerPrecision : public ::testing::TestWithParam<Precision> {};

TEST_P(PolicyTrainerPrecision, RlStepsShiftProbabilityTowardRewardedToken) {
  torch::manual_seed(2);
  PolicyModel model(tiny());
  TrainerSection t;
  t.lr = 0.01;
  t.compute.precision = GetParam();
  PolicyTrainer trainer(model, t, 1.0);
  auto probOf = [&](std::int64_t token) {
    torch::NoGradGuard ng;
    const auto tokens = torch::tensor({{1, 5}}, torch::kLong);
    const auto pos = torch::arange(2, torch::kLong).unsqueeze(0);
    const auto logits = model->forward(tokens, pos, torch::ones({1, 2}, torch::kBool));
    return torch::softmax(logits[0][1], -1)[token].item<double>();
  };
  const double before = probOf(7);
  double first_loss = 0;
  for (int step = 0; step < 20; ++step) {
    // A group where token 7 earns reward and tokens 8, 9 do not.
    std::vector<TrainingSample> group{episode(7, 1.0), episode(8, 0.0), episode(9, 0.0), episode(7, 1.0)};
    for (auto& e : group) {
      torch::NoGradGuard ng;
      const auto tokens = torch::tensor({{1, 5, e.tokens[2]}}, torch::kLong);
      e.behav_logprobs[2] = sequenceLogProbs(*model, tokens, torch::tensor({3}, torch::kLong))[0][2].item<float>();
    }
    const RlStepStats s = trainer.rlStep(collate(group, {0, 0, 0, 0}, 0));
    if (step == 0) first_loss = s.loss;
    EXPECT_TRUE(std::isfinite(s.loss));
  }
  EXPECT_GT(probOf(7), before + 0.2) << "probability of the rewarded token: " << before << " -> " << probOf(7);
  // Master weights and AdamW moments stay float32 under bf16 autocast.
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
  for (const auto& [key, state] : trainer.optimizer().state()) {
    EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*state).exp_avg().scalar_type(), torch::kFloat32);
  }
  RecordProperty("first_loss", std::to_string(first_loss));
}

INSTANTIATE_TEST_SUITE_P(Precision, PolicyTrainerPrecision, ::testing::Values(Precision::Fp32, Precision::Bf16),
                         [](const auto& p) { return std::string(p.param == Precision::Bf16 ? "bf16" : "fp32"); });

// Autocast really is on for bf16: the first step's loss differs from the float32 one (same
// weights, same batch), and by no more than bf16 rounding.
TEST(PolicyTrainerPrecisionCheck, Bf16AutocastChangesTheLossByRoundingOnly) {
  std::vector<double> losses;
  for (Precision precision : {Precision::Fp32, Precision::Bf16}) {
    torch::manual_seed(3);
    PolicyModel model(tiny());
    TrainerSection t;
    t.compute.precision = precision;
    PolicyTrainer trainer(model, t, 1.0);
    std::vector<TrainingSample> group{episode(7, 1.0), episode(8, 0.0), episode(9, 0.0), episode(7, 1.0)};
    for (auto& e : group) e.behav_logprobs[2] = -2.5f;
    losses.push_back(trainer.rlStep(collate(group, {0, 0, 0, 0}, 0)).loss);
  }
  EXPECT_NE(losses[0], losses[1]) << "bf16 autocast computed in float32";
  EXPECT_NEAR(losses[0], losses[1], 0.05 * std::abs(losses[0]) + 1e-3);
}

// trainer.lr_schedule: warm-up, then linear or cosine decay to the floor, by optimiser step.
TEST(LrSchedule, WarmupThenDecayToTheFloor) {
  TrainerSection t;
  t.lr = 1.0;
  t.warmup_steps = 4;
  t.lr_floor = 0.1;
  for (int step = 0; step < 4; ++step) EXPECT_DOUBLE_EQ(scheduledLr(t, step, 14), (step + 1) / 4.0);
  EXPECT_DOUBLE_EQ(scheduledLr(t, 4, 14), 1.0);  // constant after the warm-up
  EXPECT_DOUBLE_EQ(scheduledLr(t, 100, 14), 1.0);
  t.lr_schedule = TrainerSection::LrSchedule::Linear;
  EXPECT_DOUBLE_EQ(scheduledLr(t, 4, 14), 1.0);
  EXPECT_DOUBLE_EQ(scheduledLr(t, 9, 14), 1.0 - 0.9 * 0.5);  // half-way through the 10 decay steps
  EXPECT_DOUBLE_EQ(scheduledLr(t, 14, 14), 0.1);
  EXPECT_DOUBLE_EQ(scheduledLr(t, 50, 14), 0.1);  // stays at the floor
  t.lr_schedule = TrainerSection::LrSchedule::Cosine;
  EXPECT_DOUBLE_EQ(scheduledLr(t, 4, 14), 1.0);
  EXPECT_NEAR(scheduledLr(t, 9, 14), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(scheduledLr(t, 14, 14), 0.1, 1e-12);
  EXPECT_LT(scheduledLr(t, 6, 14), scheduledLr(t, 5, 14));
}

// Each RL optimiser step takes the rate of its own step count, and a trainer restored from a
// checkpoint continues the schedule where the saved one was.
TEST(LrSchedule, RlStepsFollowItAndAResumeContinuesIt) {
  TrainerSection t;
  t.lr = 0.01;
  t.warmup_steps = 2;
  t.lr_schedule = TrainerSection::LrSchedule::Cosine;
  t.decay_steps = 8;
  std::vector<TrainingSample> group{episode(7, 1.0), episode(8, 0.0), episode(9, 0.0), episode(7, 1.0)};
  const TrainBatch batch = collate(group, {0, 0, 0, 0}, 0);
  torch::manual_seed(3);
  PolicyModel model(tiny());
  PolicyTrainer trainer(model, t, 1.0);
  EXPECT_DOUBLE_EQ(trainer.currentLr(), 0.01);  // before any step: trainer.lr
  for (int step = 0; step < 3; ++step) {
    trainer.rlStep(batch);
    EXPECT_EQ(trainer.optimizerSteps(), step + 1);
    EXPECT_DOUBLE_EQ(trainer.currentLr(), scheduledLr(t, step, 8)) << "step " << step;
  }
  const std::string path = ::testing::TempDir() + "lr_schedule_checkpoint.h5";
  // The size the trainer checks its filesystem for bounds the file, within HDF5's overhead.
  const auto bound = trainerCheckpointBytes(trainer);
  const auto written = saveTrainerCheckpoint(path, "solver", trainer, 3);
  EXPECT_EQ(written, std::filesystem::file_size(path));
  EXPECT_GE(bound, written);
  EXPECT_LE(bound, written + (std::uint64_t{2} << 20));
  PolicyModel other(tiny());
  PolicyTrainer resumed(other, t, 1.0);
  loadTrainerCheckpoint(path, "solver", resumed);
  EXPECT_EQ(resumed.optimizerSteps(), 3);
  trainer.rlStep(batch);
  resumed.rlStep(batch);
  EXPECT_DOUBLE_EQ(resumed.currentLr(), scheduledLr(t, 3, 8));
  EXPECT_DOUBLE_EQ(resumed.currentLr(), trainer.currentLr());
  EXPECT_TRUE(model->orderedParameters().front().tensor.allclose(other->orderedParameters().front().tensor));
}
