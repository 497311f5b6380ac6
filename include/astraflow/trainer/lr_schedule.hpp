#pragma once
// The learning rate of each optimiser step (trainer.lr_schedule, docs/training.md): a linear
// warm-up over trainer.warmup_steps, then constant, linear or cosine decay to
// trainer.lr_floor × trainer.lr at the last step. The step is the optimiser's own count (AdamW's
// per-parameter `step`, which checkpoints keep), so a resumed run continues the schedule.
#include <cstdint>

#include "astraflow/core/config.hpp"

namespace astraflow {

// `step` counts optimiser steps taken before this one (0 for the first); `total_steps` is the
// schedule's length (the decay reaches the floor there and stays).
double scheduledLr(const TrainerSection& trainer, std::int64_t step, std::int64_t total_steps);

}  // namespace astraflow
