#include "astraflow/rollout/generation.hpp"

#include <algorithm>

namespace astraflow {

GenerationEngine::GenerationEngine(PolicyModel model, std::int32_t pad_id)
    : model_(std::move(model)), pad_id_(pad_id) {}

namespace {

// Samples one token per row from logits [B,V]; returns (tokens [B], logprobs [B], finite [B]).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> sampleStep(const torch::Tensor& logits,
                                                                   const SamplingOptions& o, at::Generator& gen) {
  const auto scaled = logits / (o.greedy ? 1.0 : o.temperature);
  const auto finite = torch::isfinite(scaled).all(-1);
  // Rows with NaN/inf are sampled from a harmless distribution and flagged by the caller.
  const auto safe = torch::where(finite.unsqueeze(-1), scaled, torch::zeros_like(scaled));
  const auto logp = torch::log_softmax(safe, -1);
  torch::Tensor next;
  if (o.greedy) {
    next = logp.argmax(-1);
  } else if (o.top_p < 1.0) {
    // Nucleus: keep the smallest prefix of tokens (by probability) whose mass reaches top_p.
    auto [sorted, order] = logp.exp().sort(-1, /*descending=*/true);
    const auto cum = sorted.cumsum(-1);
    const auto keep = (cum - sorted) < o.top_p;  // the token that crosses top_p is kept
    const auto filtered = torch::where(keep, sorted, torch::zeros_like(sorted));
    const auto pick = torch::multinomial(filtered, 1, false, gen);
    next = order.gather(-1, pick).squeeze(-1);
  } else {
    next = torch::multinomial(logp.exp(), 1, false, gen).squeeze(-1);
  }
  return {next, logp.gather(-1, next.unsqueeze(-1)).squeeze(-1), finite};
}

}  // namespace

std::vector<Generation> GenerationEngine::generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                                   const SamplingOptions& o, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  const auto B = static_cast<std::int64_t>(prompts.size());
  std::vector<Generation> out(prompts.size());
  if (B == 0) return out;
  std::int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(p.size()));
  const std::int64_t max_len = model_->config().max_seq_len;
  const std::int64_t steps = std::min<std::int64_t>(o.max_new_tokens, max_len - longest);
  if (steps <= 0) return out;  // no room: every row ends unstopped with nothing generated

  // Left-pad so every row's last prompt token is in the same column.
  auto prompt = torch::full({B, longest}, pad_id_, torch::kLong);
  auto acc = prompt.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[b];
    const auto off = longest - static_cast<std::int64_t>(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) acc[b][off + static_cast<std::int64_t>(i)] = p[i];
  }
  auto [positions, valid] = positionsForLeftPadded(prompt, pad_id_);
  auto next_pos = positions.select(1, longest - 1) + 1;  // [B]

  KvCache cache;
  torch::Tensor logits;
  torch::Tensor all_tokens = prompt, all_pos = positions, all_valid = valid;
  if (o.use_kv_cache) {
    cache = model_->newCache(B, longest + steps);
    logits = model_->forwardCached(prompt, positions, valid, cache).select(1, longest - 1);
  } else {
    logits = model_->forward(prompt, positions, valid).select(1, longest - 1);
  }

  std::vector<bool> done(prompts.size(), false);
  auto is_stop = [&](std::int32_t t) {
    return std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), t) != o.stop_token_ids.end();
  };
  for (std::int64_t step = 0; step < steps; ++step) {
    auto [next, logp, finite] = sampleStep(logits, o, gen);
    auto next_a = next.accessor<std::int64_t, 1>();
    auto logp_a = logp.accessor<float, 1>();
    auto finite_a = finite.accessor<bool, 1>();
    auto step_valid = torch::zeros({B, 1}, torch::kBool);
    auto step_tok = torch::full({B, 1}, pad_id_, torch::kLong);
    bool any_active = false;
    for (std::int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      if (!finite_a[b]) {
        out[b].nonfinite = true;
        done[b] = true;
        continue;
      }
      const auto tok = static_cast<std::int32_t>(next_a[b]);
      out[b].tokens.push_back(tok);
      out[b].logprobs.push_back(logp_a[b]);
      if (is_stop(tok)) {
        out[b].stopped = true;
        done[b] = true;
        continue;
      }
      step_tok[b][0] = tok;
      step_valid[b][0] = true;
      any_active = true;
    }
    if (!any_active || step + 1 == steps) break;
    const auto step_pos = next_pos.unsqueeze(1);
    next_pos = next_pos + 1;
    if (o.use_kv_cache) {
      logits = model_->forwardCached(step_tok, step_pos, step_valid, cache).select(1, 0);
    } else {
      all_tokens = torch::cat({all_tokens, step_tok}, 1);
      all_pos = torch::cat({all_pos, step_pos}, 1);
      all_valid = torch::cat({all_valid, step_valid}, 1);
      logits = model_->forward(all_tokens, all_pos, all_valid).select(1, all_tokens.size(1) - 1);
    }
  }
  return out;
}

torch::Tensor sequenceLogProbs(PolicyModelImpl& model, const torch::Tensor& tokens, const torch::Tensor& lengths,
                               double temperature) {
  const auto B = tokens.size(0), T = tokens.size(1);
  const auto idx = torch::arange(T, torch::kLong).unsqueeze(0);
  const auto valid = idx < lengths.unsqueeze(1);
  const auto positions = idx.expand({B, T}).contiguous();
  const auto logits = model.forward(tokens, positions, valid) / temperature;  // [B,T,V]
  const auto logp = torch::log_softmax(logits.narrow(1, 0, T - 1).to(torch::kFloat32), -1)
                        .gather(-1, tokens.narrow(1, 1, T - 1).unsqueeze(-1))
                        .squeeze(-1);
  return torch::cat({torch::zeros({B, 1}), logp}, 1);
}

}  // namespace astraflow
