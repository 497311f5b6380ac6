// `astraflow eval` (offline_eval.hpp): the run's evaluation sets answered by a checkpoint or a
// Hugging Face folder, through the engine or the layout's inference server, without training.
#include "astraflow/run/offline_eval.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/io/eval_table.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "astraflow/tasks/eval_plan.hpp"

namespace astraflow {

namespace {

// Episodes generated together: the engine batches them, a server keeps max_in_flight of them busy.
constexpr std::size_t kChunk = 256;

// The first rollout pool of the layout: its backend says how the policy generates.
const LayoutEntry* firstRolloutPool(const Config& cfg) {
  for (const auto& e : cfg.layout)
    if (e.role == Role::Rollout) return &e;
  return nullptr;
}

void checkOptions(const Config& cfg, const OfflineEvalOptions& o, const LayoutEntry* pool) {
  if (cfg.workflow.multiAgent())
    throw Error(
        fmt::format("{}: eval evaluates one policy; workflow {} is a team, evaluated inside `astraflow run` "
                    "(eval.every, eval.sets)",
                    cfg.source, cfg.workflow.kindName()));
  if (o.checkpoint.empty() == o.hf_folder.empty())
    throw Error(
        "eval: give one of --checkpoint FILE (an astraflow checkpoint) and --hf FOLDER (a Hugging Face folder)");
  if (pool != nullptr && pool->backend.http() && o.hf_folder.empty())
    throw Error(
        fmt::format("{}: rollout pool {} generates on a server, which loads Hugging Face folders: give --hf "
                    "(`astraflow export-hf` writes a checkpoint as one)",
                    cfg.source, pool->pool));
  if (!cfg.eval.enabled())
    throw Error(fmt::format("{}: nothing to evaluate: eval.problems is 0 and eval.sets is empty", cfg.source));
}

// The policy's text of an episode: its own tokens, without prompt or environment replies.
std::string responseText(const Tokenizer& tokenizer, const Episode& e) {
  std::vector<std::int32_t> own;
  for (std::size_t i = 0; i < e.tokens.size() && i < e.policy_mask.size(); ++i)
    if (e.policy_mask[i] != 0) own.push_back(e.tokens[i]);
  return tokenizer.decode(own);
}

// What generates the answers: the layout's server, told to load the folder, or the engine with the
// checkpoint's or the folder's weights in the policy's model. Keeps the model and engine alive.
struct Generator {
  PolicyModel model{nullptr};
  std::unique_ptr<GenerationEngine> engine;
  at::Generator random;
  std::unique_ptr<GenerationBackend> backend;
  std::string name;  // "engine" or the server's URL
};

void startGenerator(Generator& g, const Config& config, const OfflineEvalOptions& o, const LayoutEntry* pool,
                    const Tokenizer& tokenizer) {
  g.random = at::detail::createCPUGenerator(config.run.seed);
  if (pool != nullptr && pool->backend.http()) {
    RolloutBackendSpec spec = pool->backend;
    spec.urls = spec.urlsFor(config.policies.front().name);
    // vLLM reloads a tied head stale (docs/rollout-backends.md, "Tied embeddings").
    if (spec.api == HttpApi::Vllm && readHfModelConfig(o.hf_folder).model.tied_embeddings)
      throw Error(
          fmt::format("eval: {} ties its embeddings, which a vLLM server reloads wrong; write it with "
                      "`astraflow export-hf --untied` and give that folder",
                      o.hf_folder));
    auto h = std::make_unique<HttpBackend>(spec, 0, config.policies.front().model.max_seq_len);
    if (!h->loadWeights(std::filesystem::absolute(o.hf_folder).string(), 0))
      throw Error(fmt::format("eval: the server at {} did not load {}", h->url(), o.hf_folder));
    g.name = h->url();
    g.backend = std::move(h);
    return;
  }
  const std::string& policy = config.policies.front().name;
  const auto device = resolveDevice(config.trainer.compute.device, 0, "trainer.device");
  g.model = buildPolicyModel(config, tokenSpecOf(tokenizer), policy, device);
  if (!o.checkpoint.empty())
    loadCheckpointFile(o.checkpoint, policy, *g.model);
  else
    loadHfWeights(*g.model, o.hf_folder, HfLoad::Copy);
  g.model->eval();
  g.engine = std::make_unique<GenerationEngine>(g.model, tokenizer.padId(), schedulingFrom(config));
  g.backend = std::make_unique<EngineBackend>(*g.engine, g.random);
  g.name = "engine";
}

// The round's sets and problems (rewards and texts still empty); every answer to give, as
// (problem index in round.problems, sample).
std::vector<std::pair<std::size_t, std::uint32_t>> planRound(EvalRoundResult& round, const EvalSection& eval,
                                                             Environment& env) {
  std::vector<std::pair<std::size_t, std::uint32_t>> answers;
  const auto plans = planEvalSets(eval, env);
  for (std::size_t s = 0; s < plans.size(); ++s) {
    round.sets.push_back({plans[s].name, plans[s].problems, plans[s].samples, 0.0, 0.0});
    for (std::uint64_t k = 0; k < plans[s].problems; ++k) {
      EvalProblemResult p;
      p.set = static_cast<std::uint32_t>(s);
      p.index = k;
      p.problem_id = env.heldOutSetId(plans[s].set, k);
      p.answer = env.referenceAnswer(p.problem_id);
      p.rewards.assign(plans[s].samples, 0.0);
      p.responses.assign(plans[s].samples, std::string());
      for (std::uint32_t i = 0; i < plans[s].samples; ++i) answers.emplace_back(round.problems.size(), i);
      round.problems.push_back(std::move(p));
    }
  }
  return answers;
}

}  // namespace

OfflineEvalResult evaluateOffline(const Config& config, const OfflineEvalOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const LayoutEntry* pool = firstRolloutPool(config);
  checkOptions(config, o, pool);
  OfflineEvalResult result;
  result.weights = o.checkpoint.empty() ? o.hf_folder : o.checkpoint;
  auto tokenizer = makeEnvironmentTokenizer(config.environment);
  auto env = makeEnvironment(config.environment);
  Generator generator;
  startGenerator(generator, config, o, pool, *tokenizer);
  result.backend = generator.name;

  SamplingOptions sampling = samplingFrom(config);
  sampling.greedy = config.eval.temperature == 0.0;
  if (!sampling.greedy) sampling.temperature = config.eval.temperature;
  EvalRoundResult& round = result.round;
  const std::int64_t version =
      o.checkpoint.empty() ? 0 : io::H5File::openReadOnly(o.checkpoint).readInt64Attribute("version");
  round.version_low = round.version_high = version;
  const auto answers = planRound(round, config.eval, *env);
  for (std::size_t start = 0; start < answers.size(); start += kChunk) {
    const std::size_t end = std::min(answers.size(), start + kChunk);
    std::vector<std::uint64_t> ids;
    for (std::size_t i = start; i < end; ++i) ids.push_back(round.problems[answers[i].first].problem_id);
    const auto episodes = runEpisodes(*generator.backend, *tokenizer, config.environment, ids, sampling);
    for (std::size_t i = start; i < end; ++i) {
      const Episode& e = episodes[i - start];
      EvalProblemResult& p = round.problems[answers[i].first];
      // A failed or non-finite answer scores 0 and is counted.
      if (e.failed || e.nonfinite) ++result.failed;
      p.rewards[answers[i].second] = e.failed || e.nonfinite || !std::isfinite(e.reward) ? 0.0 : e.reward;
      p.responses[answers[i].second] = responseText(*tokenizer, e);
    }
    if (o.progress) o.progress(end, answers.size());
  }
  round.score();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  round.t_end = result.seconds;
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    result.table = (std::filesystem::path(o.out_dir) / "eval.h5").string();
    io::EvalTableWriter(result.table, /*truncate=*/true).write(round);
  }
  return result;
}

std::string OfflineEvalResult::json() const {
  nlohmann::json sets = nlohmann::json::object();
  for (const auto& s : round.sets)
    sets[s.name] = {
        {"accuracy", s.accuracy}, {"pass_at_k", s.pass_at_k}, {"problems", s.problems}, {"samples", s.samples}};
  nlohmann::json j = {{"backend", backend},
                      {"weights", weights},
                      {"version", round.version_high},
                      {"sets", sets},
                      {"mean_accuracy", round.meanAccuracy()},
                      {"mean_pass_at_k", round.meanPassAtK()},
                      {"failed", failed},
                      {"seconds", seconds},
                      {"table", table.empty() ? nlohmann::json(nullptr) : nlohmann::json(table)}};
  return j.dump();
}

}  // namespace astraflow
