// InferenceServer: a Hugging Face folder loaded (tokenizer, chat template, eos ids, weights under astraflow's policy
// mask) behind an HttpServer with the SGLang and OpenAI routes, generating through a GenerationQueue.
#include "astraflow/serve/inference_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/model_setup.hpp"
#include "serve/serve_state.hpp"

namespace astraflow {

namespace {

using serve_detail::json;

// The ids generation ends on: the tokenizer's end-of-sequence token and every eos_token_id of
// config.json and generation_config.json (an integer or a list), as transformers' generate does.
std::vector<std::int32_t> eosIds(const std::filesystem::path& folder, const HfModelConfig& hf, const HfTokenizer* tok) {
  std::vector<std::int32_t> ids;
  if (tok && tok->eosId() >= 0) ids.push_back(tok->eosId());
  for (int id : hf.eos_token_ids) ids.push_back(id);
  std::ifstream in(folder / "generation_config.json");
  if (in) {
    json g;
    try {
      g = json::parse(in);
    } catch (const json::parse_error& e) {
      throw Error(fmt::format("{} is not JSON: {}", (folder / "generation_config.json").string(), e.what()));
    }
    const auto it = g.find("eos_token_id");
    if (it != g.end() && it->is_number_integer()) ids.push_back(it->get<std::int32_t>());
    if (it != g.end() && it->is_array())
      for (const auto& v : *it)
        if (v.is_number_integer()) ids.push_back(v.get<std::int32_t>());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

InferenceServer::InferenceServer(const ServeOptions& options) : state_(std::make_unique<serve_detail::ServeState>()) {
  auto& s = *state_;
  s.options = options;
  s.served_name = options.served_name.empty() ? std::filesystem::weakly_canonical(options.model).filename().string()
                                              : options.served_name;
  s.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const HfModelConfig hf = readHfModelConfig(options.model.string());
  if (std::filesystem::exists(options.model / "tokenizer.json")) {
    try {
      s.tokenizer = HfTokenizer::load(options.model);
    } catch (const std::exception& e) {
      // The task vocabulary's WordLevel file, say: token-id requests still work.
      spdlog::warn("astraflow serve: {}; serving token ids only (text prompts, stop strings and chat are refused)",
                   e.what());
    }
  }
  if (s.tokenizer && !readChatTemplateSource(options.model).empty())
    s.chat_template.emplace(ChatTemplate::load(options.model));
  s.eos_ids = eosIds(options.model, hf, s.tokenizer.get());

  ComputeOptions compute;
  if (!parseDeviceRequest(options.device, compute.device))
    throw Error(fmt::format("--device '{}'; allowed: cpu, cuda, cuda:N", options.device));
  const auto precision = enumByName(kPrecisionNames, options.precision);
  if (!precision) throw Error(fmt::format("--precision '{}'; allowed: auto, fp32, bf16", options.precision));
  compute.precision = *precision;
  if (compute.device.cuda()) loadCudaSupport();
  const torch::Device device = resolveDevice(compute.device, 0, "--device");
  PolicyModel model(hf.model);
  loadHfWeights(*model, options.model, HfLoad::Map);  // a float32 folder served in float32 is not copied
  // The policy's distribution as astraflow trains it (model/model_builder.cpp): <pad>, <bos> and
  // ids past the tokenizer's vocabulary have probability 0, so the log-probs served are the ones
  // a trainer recomputes.
  std::vector<std::int64_t> never;
  const int pad_id = s.tokenizer ? s.tokenizer->padId() : hf.pad_token_id;
  const int bos_id = s.tokenizer ? s.tokenizer->bosId() : hf.bos_token_id;
  if (pad_id >= 0) never.push_back(pad_id);
  if (bos_id >= 0 && bos_id != pad_id) never.push_back(bos_id);
  if (s.tokenizer)
    for (std::int64_t id = s.tokenizer->vocabSize(); id < hf.model.vocab_size; ++id) never.push_back(id);
  if (options.policy_mask) model->setNeverGenerate(never);
  if (device != torch::Device(torch::kCPU) || computeDtype(compute) != torch::kFloat32)
    model->place(device, computeDtype(compute));
  model->eval();
  const std::int32_t pad =
      s.tokenizer && s.tokenizer->padId() >= 0 ? s.tokenizer->padId() : std::max(0, hf.pad_token_id);
  SchedulerOptions scheduling;
  scheduling.max_running = options.max_batch;  // requests running together
  s.queue = std::make_unique<serve_detail::GenerationQueue>(
      GenerationEngine(model, pad, scheduling), options.max_batch,
      std::chrono::microseconds(static_cast<std::int64_t>(options.batch_wait_ms * 1000)), options.seed,
      options.weight_version);
  s.http = std::make_unique<HttpServer>(
      options.http_threads,
      HttpServerLimits{options.limits.max_body_bytes, options.limits.read_timeout_s, options.limits.idle_timeout_s});
  serve_detail::addSglangRoutes(s);
  serve_detail::addOpenAiRoutes(s);
  s.http->onUnmatched([&s](const HttpRequest& req, HttpResponse& res, bool path_exists) {
    const serve_detail::ApiError e(path_exists ? 405 : 404,
                                   path_exists ? fmt::format("Method {} is not allowed on {}", req.method, req.path)
                                               : fmt::format("No route for {} {}", req.method, req.path),
                                   {}, path_exists ? "method_not_allowed" : "not_found");
    s.refused.count(e.code);
    serve_detail::answerError(res, e);
  });
  s.port = s.http->bind(options.host, options.port);
}

InferenceServer::~InferenceServer() {
  // The HTTP threads go first: none may wait on the queue once it is gone.
  if (state_->http) state_->http->stop();
}

int InferenceServer::port() const { return state_->port; }

void InferenceServer::start() { state_->http->start(); }

void InferenceServer::stop() { state_->http->stop(); }

std::string InferenceServer::statsLine() const {
  const auto st = state_->queue->stats();
  return fmt::format(
      "{} requests in {} steps (mean {:.1f} running, most {}), {} tokens generated, {} weight updates, {} aborted, "
      "{} refused",
      st.requests, st.steps, st.steps ? static_cast<double>(st.rows) / st.steps : 0.0, st.most_running,
      st.generated_tokens, st.weight_updates, st.aborted, state_->refused.total() + state_->http->bodiesTooLarge());
}

}  // namespace astraflow
