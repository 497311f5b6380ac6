// The single-process loops: runSft / runWorkflowSft (warm start on reference solutions) and runTrainLocal (generate,
// reward, loss, step, with greedy evaluation), the correctness reference for the distributed runtime.
#include "astraflow/run/local_loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "astraflow/core/error.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/rollout/episode.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/trainer/policy_trainer.hpp"

namespace astraflow {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

std::string LocalRunResult::json() const {
  nlohmann::json j;
  j["eval_accuracy_start"] = eval_accuracy_start;
  j["eval_accuracy_end"] = eval_accuracy_end;
  j["steps"] = steps;
  j["wall_seconds"] = wall_seconds;
  j["dropped_nonfinite"] = dropped;
  return j.dump();
}

double evaluateGreedy(GenerationEngine& engine, const Tokenizer& tokenizer, const Config& config, int problems) {
  if (problems <= 0) return 0.0;  // eval.problems: 0 turns evaluation off
  engine.model()->eval();
  auto env = makeEnvironment(config.environment);
  std::vector<std::uint64_t> ids;
  for (int k = 0; k < problems; ++k) ids.push_back(env->heldOutId(static_cast<std::uint64_t>(k)));
  SamplingOptions greedy = samplingFrom(config);
  greedy.greedy = true;
  auto gen = at::detail::createCPUGenerator(0);  // unused by greedy decoding
  double solved = 0;
  constexpr std::size_t kChunk = 256;
  for (std::size_t start = 0; start < ids.size(); start += kChunk) {
    std::vector<std::uint64_t> part(ids.begin() + start, ids.begin() + std::min(ids.size(), start + kChunk));
    for (const auto& e : runEpisodes(engine, tokenizer, config.environment, part, greedy, gen)) solved += e.reward;
  }
  return ids.empty() ? 0.0 : solved / static_cast<double>(ids.size());
}

LocalRunResult runSft(const Config& config) {
  if (config.workflow.multiAgent()) return runWorkflowSft(config);
  const auto t0 = Clock::now();
  configureThreads(config, 1);
  auto tokenizer = makeEnvironmentTokenizer(config.environment);
  // One model for the engine and the trainer: on trainer.device, in float32.
  const auto device = resolveDevice(config.trainer.compute.device, 0, "trainer.device");
  PolicyModel model = buildPolicyModel(config, tokenSpecOf(*tokenizer), {}, device);
  GenerationEngine engine(model, tokenizer->padId(), schedulingFrom(config));
  PolicyTrainer trainer(model, config.trainer, 1.0);
  auto env = makeEnvironment(config.environment);
  std::mt19937_64 rng(config.run.seed);

  LocalRunResult result;
  result.eval_accuracy_start = evaluateGreedy(engine, *tokenizer, config, config.eval.problems);
  result.eval_accuracy_end = result.eval_accuracy_start;
  spdlog::info("sft: {} parameters, held-out greedy accuracy {:.3f} at start", model->parameterCount(),
               result.eval_accuracy_start);
  for (int step = 1; step <= config.sft.max_steps; ++step) {
    std::vector<Episode> batch;
    for (int i = 0; i < config.sft.batch_size; ++i) {
      const std::uint64_t id = env->referenceId(rng() >> 32);
      batch.push_back(referenceEpisode(*tokenizer, config.environment, id));
      if (batch.back().turns == 0) {
        throw Error(fmt::format(
            "sft: environment '{}' has no reference turns for problem {} (a dataset row needs "
            "its solution field or an answer with a math, choice or exact reward; an OpenEnv server knows no "
            "solutions: set environment.openenv.demonstrations)",
            config.environment.name, id));
      }
      if (batch.back().tokens.size() > static_cast<std::size_t>(model->config().max_seq_len)) {
        throw Error(
            fmt::format("policies[0].model.max_seq_len ({}) is shorter than a reference episode of "
                        "environment '{}' ({} tokens)",
                        model->config().max_seq_len, config.environment.name, batch.back().tokens.size()));
      }
    }
    const double loss = trainer.sftStep(collate(batch, {}, tokenizer->padId()), config.sft.lr);
    result.steps = step;
    if (step % config.sft.eval_every == 0 || step == config.sft.max_steps) {
      result.eval_accuracy_end = evaluateGreedy(engine, *tokenizer, config, config.eval.problems);
      spdlog::info("sft step {}: loss {:.4f}, held-out greedy accuracy {:.3f}", step, loss, result.eval_accuracy_end);
      if (result.eval_accuracy_end >= config.sft.target_accuracy) break;
    }
  }
  result.checkpoint = config.sft.checkpoint;
  saveCheckpointFile(result.checkpoint, config.policies.front().name, *model, 0);
  result.wall_seconds = secondsSince(t0);
  spdlog::info("sft: wrote {} after {} steps ({:.1f} s)", result.checkpoint, result.steps, result.wall_seconds);
  return result;
}

LocalRunResult runTrainLocal(const Config& config) {
  if (config.workflow.multiAgent()) {
    throw Error(fmt::format("{}: train-local runs single-agent episodes; workflow {} trains with `astraflow run`",
                            config.source, config.workflow.kindName()));
  }
  const auto t0 = Clock::now();
  configureThreads(config, 1);
  auto tokenizer = makeEnvironmentTokenizer(config.environment);
  // One model for the engine and the trainer: on trainer.device, in float32.
  const auto device = resolveDevice(config.trainer.compute.device, 0, "trainer.device");
  PolicyModel model = buildPolicyModel(config, tokenSpecOf(*tokenizer), {}, device);
  LocalRunResult result;
  std::string init = config.local.init_checkpoint.empty() ? config.sft.checkpoint : config.local.init_checkpoint;
  if (std::filesystem::exists(init)) {
    loadCheckpointFile(init, config.policies.front().name, *model);
    result.checkpoint = init;
    spdlog::info("train-local: warm start from {}", init);
  } else if (!config.local.init_checkpoint.empty()) {
    throw Error(fmt::format("local.init_checkpoint: '{}' does not exist (run `astraflow sft` first)", init));
  } else {
    spdlog::warn("train-local: no warm start at {}; training from random weights", init);
  }
  GenerationEngine engine(model, tokenizer->padId(), schedulingFrom(config));
  PolicyTrainer trainer(model, config.trainer, config.rollout.temperature);
  trainer.setScheduleLength(static_cast<std::int64_t>(config.local.steps) * config.trainer.ppo_epochs *
                            config.trainer.mini_batches);
  auto env = makeEnvironment(config.environment);
  std::mt19937_64 rng(config.run.seed);
  auto gen = makeGenerator(device, config.run.seed + 1);
  const SamplingOptions sampling = samplingFrom(config);

  result.eval_accuracy_start = evaluateGreedy(engine, *tokenizer, config, config.eval.problems);
  result.eval_accuracy_end = result.eval_accuracy_start;
  spdlog::info("train-local: held-out greedy accuracy {:.3f} at start", result.eval_accuracy_start);
  for (int step = 1; step <= config.local.steps; ++step) {
    if (config.local.max_wall_seconds > 0 && secondsSince(t0) > config.local.max_wall_seconds) break;
    std::vector<std::uint64_t> ids;
    std::vector<std::int64_t> groups;
    for (int g = 0; g < config.trainer.groups_per_step; ++g) {
      const auto id = env->trainingId(rng() >> 32);
      for (int i = 0; i < config.rollout.group_size; ++i) {
        ids.push_back(id);
        groups.push_back(g);
      }
    }
    model->eval();
    const auto episodes = runEpisodes(engine, *tokenizer, config.environment, ids, sampling, gen);
    const auto stats = trainer.rlStep(collate(episodes, groups, tokenizer->padId()));
    result.dropped += stats.dropped + stats.skipped_steps;
    result.steps = step;
    if (step % config.eval.every == 0) {
      result.eval_accuracy_end = evaluateGreedy(engine, *tokenizer, config, config.eval.problems);
      spdlog::info("train-local step {}: reward {:.3f}, loss {:.4f}, clipped {:.3f}, held-out greedy accuracy {:.3f}",
                   step, stats.reward_mean, stats.loss, stats.clipped_fraction, result.eval_accuracy_end);
    }
  }
  result.eval_accuracy_end = evaluateGreedy(engine, *tokenizer, config, config.eval.problems);
  result.wall_seconds = secondsSince(t0);
  return result;
}

}  // namespace astraflow
