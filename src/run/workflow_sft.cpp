// Warm start of a multi-agent workflow (`astraflow sft` on a config with a workflow): each
// role's policy (later roles starting from the first role's result when the shapes match) is
// trained on its own reference examples (include/astraflow/rollout/workflow.hpp)
// until its greedy accuracy on held-out examples reaches the policy's target, and all policies
// go into one warm-start file (sft.checkpoint), where each trainer finds its own.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <random>

#include "astraflow/core/error.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/rollout/workflow.hpp"
#include "astraflow/run/local_loop.hpp"
#include "astraflow/tasks/environment.hpp"
#include "astraflow/trainer/policy_trainer.hpp"

namespace astraflow {

namespace {

// fp32 copy of every parameter when both models have the same parameter names and shapes.
bool copySameShapeWeights(PolicyModelImpl& from, PolicyModelImpl& to) {
  const auto src = from.named_parameters();
  auto dst = to.named_parameters();
  if (src.size() != dst.size()) return false;
  for (const auto& p : src) {
    const auto* q = dst.find(p.key());
    if (!q || !q->sizes().equals(p.value().sizes())) return false;
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : src) dst[p.key()].copy_(p.value());
  return true;
}

}  // namespace

double evaluateRoleGreedy(GenerationEngine& engine, const Tokenizer& tokenizer, const Config& config, std::size_t role,
                          int problems) {
  if (problems <= 0) return 0.0;
  // The solver answers the environment's own prompt: scored as the single-agent warm start is.
  const auto& r = config.workflow.roles.at(role);
  if (r.role == TeamRole::Solver && (r.context == "{feedback}{problem}" || r.context == "{problem}")) {
    return evaluateGreedy(engine, tokenizer, config, problems);
  }
  engine.model()->eval();
  auto env = makeEnvironment(config.environment);
  std::mt19937_64 rng(0x5eed);  // the same held-out examples at every evaluation
  std::vector<RoleExample> examples;
  std::vector<std::vector<std::int32_t>> prompts;
  for (int k = 0; k < problems; ++k) {
    examples.push_back(roleExample(config.workflow, role, tokenizer, config.environment,
                                   env->heldOutId(static_cast<std::uint64_t>(k)), rng));
    prompts.push_back(examples.back().prompt.tokens);
  }
  SamplingOptions greedy = samplingFrom(config);
  greedy.greedy = true;
  // A chat turn ends at the template's end of turn, as the team's turns do.
  greedy.stop_token_ids = config.workflow.chat ? std::vector<std::int32_t>{tokenizer.eosId()}
                                               : roleStopIds(config.workflow, role, tokenizer);
  auto gen = at::detail::createCPUGenerator(0);  // unused by greedy decoding
  const auto outputs = engine.generate(prompts, greedy, gen);
  double right = 0;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string text = tokenizer.decode(outputs[i].tokens);
    if (config.workflow.chat && r.role == TeamRole::Solver) {
      // The chat Solver's answer is right when the environment's reward says so (its working may
      // differ from the row's solution).
      env->reset(examples[i].prompt.problem_id);
      right += env->step(text).reward >= 1.0 ? 1.0 : 0.0;
      continue;
    }
    right += sameDecision(config.workflow, role, text, examples[i].reference);
  }
  return right / static_cast<double>(problems);
}

LocalRunResult runWorkflowSft(const Config& config) {
  if (config.workflow.chat && config.workflow.kind != WorkflowKind::SolverVerifier)
    throw Error(
        fmt::format("{}: warm-start SFT of the code workflow {} is not built (its roles have no reference "
                    "outputs); start each policy from a model folder (policies[i].model.hf) and run "
                    "`astraflow run` directly",
                    config.source, config.workflow.kindName()));
  const auto t0 = std::chrono::steady_clock::now();
  configureThreads(config, 1);
  auto tokenizer = makeEnvironmentTokenizer(config.environment);
  auto env = makeEnvironment(config.environment);
  const auto& wf = config.workflow;
  std::vector<PolicyModel> models;
  LocalRunResult result;
  result.eval_accuracy_start = result.eval_accuracy_end = 0;
  for (std::size_t role = 0; role < wf.roles.size(); ++role) {
    const auto& policy = *config.findPolicy(wf.roles[role].policy);
    const double target = policy.sft_target_accuracy >= 0 ? policy.sft_target_accuracy : config.sft.target_accuracy;
    PolicyModel model = buildPolicyModel(config, tokenSpecOf(*tokenizer), policy.name,
                                         resolveDevice(config.trainer.compute.device, 0, "trainer.device"));
    // Like the paper's teams (every role starts from the same base model), a later role starts
    // from the first role's warm start when their models have the same shape: the verifier and
    // the selector need the solver's arithmetic to judge answers.
    if (role > 0 && copySameShapeWeights(*models.front(), *model)) {
      spdlog::info("sft {} ({}): starting from the {} warm start", wf.roles[role].name, policy.name,
                   wf.roles.front().name);
    }
    GenerationEngine engine(model, tokenizer->padId(), schedulingFrom(config));
    PolicyTrainer trainer(model, config.trainer, 1.0);
    // The first role draws the same examples as the single-agent warm start (runSft), so a team's
    // solver starts exactly where a solver trained alone does.
    std::mt19937_64 rng(role == 0 ? config.run.seed : config.run.seed * 977 + role);
    double accuracy = evaluateRoleGreedy(engine, *tokenizer, config, role, config.eval.problems);
    const double start = accuracy;
    int step = 0;
    while (accuracy < target && step < config.sft.max_steps) {
      std::vector<Episode> batch;
      for (int i = 0; i < config.sft.batch_size; ++i) {
        const auto ex = roleExample(wf, role, *tokenizer, config.environment, env->trainingId(rng() >> 32), rng);
        batch.push_back(roleReferenceEpisode(ex, *tokenizer));
        if (batch.back().tokens.size() > static_cast<std::size_t>(model->config().max_seq_len)) {
          throw Error(
              fmt::format("policies: {}.model.max_seq_len ({}) is shorter than a {} example of workflow {} "
                          "({} tokens)",
                          policy.name, model->config().max_seq_len, wf.roles[role].name, wf.kindName(),
                          batch.back().tokens.size()));
        }
      }
      const double loss = trainer.sftStep(collate(batch, {}, tokenizer->padId()), config.sft.lr);
      ++step;
      if (step % config.sft.eval_every == 0 || step == config.sft.max_steps) {
        accuracy = evaluateRoleGreedy(engine, *tokenizer, config, role, config.eval.problems);
        spdlog::info("sft {} ({}): step {}, loss {:.4f}, held-out greedy accuracy {:.3f}", wf.roles[role].name,
                     policy.name, step, loss, accuracy);
      }
    }
    spdlog::info("sft {} ({}): accuracy {:.3f} → {:.3f} after {} steps (target {:.2f})", wf.roles[role].name,
                 policy.name, start, accuracy, step, target);
    if (role == 0) {
      result.eval_accuracy_start = start;
      result.eval_accuracy_end = accuracy;
    }
    result.steps += step;
    models.push_back(model);
  }
  std::vector<std::pair<std::string, const PolicyModelImpl*>> out;
  for (std::size_t role = 0; role < wf.roles.size(); ++role)
    out.emplace_back(wf.roles[role].policy, models[role].get());
  result.checkpoint = config.sft.checkpoint;
  saveCheckpointFile(result.checkpoint, out, 0);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("sft: wrote {} ({} policies, {:.1f} s)", result.checkpoint, out.size(), result.wall_seconds);
  return result;
}

}  // namespace astraflow
