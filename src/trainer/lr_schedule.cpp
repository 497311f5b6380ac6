// scheduledLr: the learning rate of an optimiser step: a linear warm-up, then constant, linear or cosine decay to
// trainer.lr_floor × trainer.lr.
#include "astraflow/trainer/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace astraflow {

double scheduledLr(const TrainerSection& t, std::int64_t step, std::int64_t total_steps) {
  const std::int64_t warmup = std::max(0, t.warmup_steps);
  if (step < warmup) return t.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (t.lr_schedule == TrainerSection::LrSchedule::Constant) return t.lr;
  const std::int64_t span = std::max<std::int64_t>(1, total_steps - warmup);
  const double progress = std::clamp(static_cast<double>(step - warmup) / static_cast<double>(span), 0.0, 1.0);
  const double floor = t.lr_floor;
  if (t.lr_schedule == TrainerSection::LrSchedule::Linear) return t.lr * (1.0 - (1.0 - floor) * progress);
  return t.lr * (floor + (1.0 - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace astraflow
