// GenerationEngine: generate() through the continuous SequenceScheduler with a generator per row, and generateStatic,
// the left-padded static-batch reference; also samplingFrom and schedulingFrom, read from the config.
#include "astraflow/rollout/generation.hpp"

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace astraflow {

GenerationEngine::GenerationEngine(PolicyModel model, std::int32_t pad_id, const SchedulerOptions& scheduling)
    : model_(std::move(model)), pad_id_(pad_id), scheduling_(scheduling) {}

namespace {

// Samples one token per row from logits [B,V]; returns (tokens [B], logprobs [B], finite [B]).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> sampleStep(const torch::Tensor& logits,
                                                                   const SamplingOptions& o, at::Generator& gen) {
  const auto scaled = logits / (o.greedy ? 1.0 : o.temperature);
  // −inf is legitimate (tokens the model never emits); NaN or +inf is not.
  const auto finite = (~(torch::isnan(scaled) | torch::isposinf(scaled))).all(-1);
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
                                                   const SamplingOptions& o, at::Generator& gen,
                                                   const RowControl& control) {
  if (!o.use_kv_cache) return generateStatic(prompts, o, gen, control);
  torch::NoGradGuard no_grad;
  std::vector<Generation> out(prompts.size());
  if (prompts.empty()) return out;
  if (!scheduler().idle()) {
    throw Error("engine: generate() while another caller's sequences run on its scheduler (an EpisodeStream)");
  }
  // One seed per row from the caller's generator: the batch is reproducible from it, and a
  // row's draws are its own.
  const auto seeds = torch::randint(0, std::numeric_limits<std::int64_t>::max(),
                                    {static_cast<std::int64_t>(prompts.size())}, gen, torch::kLong);
  const auto seed_a = seeds.accessor<std::int64_t, 1>();
  std::unordered_map<SequenceId, std::size_t> row_of;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    SequenceRequest r;
    r.prompt = prompts[b];
    r.options = o;
    if (!control.max_new_tokens.empty()) r.options.max_new_tokens = control.max_new_tokens[b];
    r.seed = static_cast<std::uint64_t>(seed_a[static_cast<std::int64_t>(b)]);
    if (control.on_token) {
      r.on_token = [&control, b](std::int32_t token, float logprob) { return control.on_token(b, token, logprob); };
    }
    row_of[scheduler_->submit(std::move(r))] = b;
  }
  while (!scheduler_->idle()) {
    for (auto& f : scheduler_->step()) out[row_of.at(f.id)] = std::move(f.generation);
  }
  return out;
}

SequenceScheduler& GenerationEngine::scheduler() {
  if (!scheduler_) scheduler_ = std::make_unique<SequenceScheduler>(model_, pad_id_, scheduling_);
  return *scheduler_;
}

SchedulerCounters GenerationEngine::schedulerCounters() const {
  return scheduler_ ? scheduler_->counters() : SchedulerCounters{};
}

std::vector<Generation> GenerationEngine::generateStatic(const std::vector<std::vector<std::int32_t>>& prompts,
                                                         const SamplingOptions& o, at::Generator& gen,
                                                         const RowControl& control) {
  torch::NoGradGuard no_grad;
  const auto B = static_cast<std::int64_t>(prompts.size());
  std::vector<Generation> out(prompts.size());
  if (B == 0) return out;
  const std::int64_t max_len = model_->config().max_seq_len;
  // Each row may generate up to the context limit counted from its own length.
  std::vector<std::int64_t> budget(prompts.size());
  std::int64_t longest = 0, steps = 0;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    const auto len = static_cast<std::int64_t>(prompts[b].size());
    longest = std::max(longest, len);
    const int limit = control.max_new_tokens.empty() ? o.max_new_tokens : control.max_new_tokens[b];
    budget[b] = std::max<std::int64_t>(0, std::min<std::int64_t>(limit, max_len - len));
    steps = std::max(steps, budget[b]);
  }
  if (steps <= 0 || longest == 0) return out;  // no room anywhere: nothing generated, not stopped

  // Left-pad so every row's last prompt token is in the same column. Validity and positions
  // come from the row lengths, never from token values.
  auto prompt = torch::full({B, longest}, pad_id_, torch::kLong);
  auto valid = torch::zeros({B, longest}, torch::kBool);
  auto positions = torch::zeros({B, longest}, torch::kLong);
  {
    auto tok = prompt.accessor<std::int64_t, 2>();
    auto val = valid.accessor<bool, 2>();
    auto pos = positions.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& p = prompts[b];
      const auto off = longest - static_cast<std::int64_t>(p.size());
      for (std::size_t i = 0; i < p.size(); ++i) {
        tok[b][off + static_cast<std::int64_t>(i)] = p[i];
        val[b][off + static_cast<std::int64_t>(i)] = true;
        pos[b][off + static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(i);
      }
    }
  }
  // Built on the host, used where the model is (one small host→device copy per tensor).
  const auto device = model_->device();
  prompt = prompt.to(device);
  valid = valid.to(device);
  positions = positions.to(device);
  std::vector<std::int64_t> next_pos(prompts.size());
  for (std::size_t b = 0; b < prompts.size(); ++b) next_pos[b] = static_cast<std::int64_t>(prompts[b].size());

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
  for (std::size_t b = 0; b < prompts.size(); ++b) done[b] = budget[b] == 0 || prompts[b].empty();
  auto is_stop = [&](std::int32_t t) {
    return std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), t) != o.stop_token_ids.end();
  };
  auto step_tok = torch::full({B, 1}, pad_id_, torch::kLong);
  auto step_valid = torch::zeros({B, 1}, torch::kBool);
  auto step_pos = torch::zeros({B, 1}, torch::kLong);
  const auto banned =
      o.banned_token_ids.empty()
          ? torch::Tensor()
          : torch::tensor(std::vector<std::int64_t>(o.banned_token_ids.begin(), o.banned_token_ids.end()), torch::kLong)
                .to(device);
  for (std::int64_t step = 0; step < steps; ++step) {
    if (banned.defined()) logits = logits.index_fill(-1, banned, -std::numeric_limits<float>::infinity());
    if (step < o.min_new_tokens && !o.stop_token_ids.empty()) {
      // Too early to stop: the stop tokens cannot be drawn (the behaviour log-probs are those of
      // the distribution actually sampled from).
      logits = logits.clone();
      for (auto t : o.stop_token_ids) logits.select(-1, t).fill_(-std::numeric_limits<float>::infinity());
    }
    auto [next_d, logp_d, finite_d] = sampleStep(logits, o, gen);
    // The sampled tokens, their log-probs and flags come to the host (B values each): the
    // trajectory records and the stop logic need them there.
    const auto next = next_d.to(torch::kCPU), logp = logp_d.to(torch::kCPU), finite = finite_d.to(torch::kCPU);
    auto next_a = next.accessor<std::int64_t, 1>();
    auto logp_a = logp.accessor<float, 1>();
    auto finite_a = finite.accessor<bool, 1>();
    auto tok_a = step_tok.accessor<std::int64_t, 2>();
    auto valid_a = step_valid.accessor<bool, 2>();
    auto pos_a = step_pos.accessor<std::int64_t, 2>();
    bool any_active = false;
    for (std::int64_t b = 0; b < B; ++b) {
      tok_a[b][0] = pad_id_;
      valid_a[b][0] = false;
      pos_a[b][0] = next_pos[b];
      if (done[b]) continue;
      if (!finite_a[b]) {
        out[b].nonfinite = true;
        done[b] = true;
        continue;
      }
      const auto tok = static_cast<std::int32_t>(next_a[b]);
      out[b].tokens.push_back(tok);
      out[b].logprobs.push_back(logp_a[b]);
      if (control.on_token && !control.on_token(static_cast<std::size_t>(b), tok, logp_a[b])) {
        out[b].stopped = out[b].ended_by_caller = true;
        done[b] = true;
        continue;
      }
      if (is_stop(tok)) {
        out[b].stopped = true;
        done[b] = true;
        continue;
      }
      if (static_cast<std::int64_t>(out[b].tokens.size()) >= budget[b]) {
        done[b] = true;  // out of room: ends unstopped
        continue;
      }
      tok_a[b][0] = tok;
      valid_a[b][0] = true;
      next_pos[b]++;
      any_active = true;
    }
    if (!any_active) break;
    const auto tok_d = step_tok.to(device), pos_d = step_pos.to(device), valid_d = step_valid.to(device);
    if (o.use_kv_cache) {
      logits = model_->forwardCached(tok_d, pos_d, valid_d, cache).select(1, 0);
    } else {
      all_tokens = torch::cat({all_tokens, tok_d}, 1);
      all_pos = torch::cat({all_pos, pos_d}, 1);
      all_valid = torch::cat({all_valid, valid_d}, 1);
      logits = model_->forward(all_tokens, all_pos, all_valid).select(1, all_tokens.size(1) - 1);
    }
  }
  return out;
}

SamplingOptions samplingFrom(const Config& c) {
  SamplingOptions s;
  s.temperature = c.rollout.temperature;
  s.top_p = c.rollout.top_p;
  s.max_new_tokens = c.rollout.max_new_tokens;
  return s;
}

SchedulerOptions schedulingFrom(const Config& c) {
  SchedulerOptions s;
  s.max_running = c.rollout.max_running;
  s.kv_cache_bytes = c.rollout.kv_cache_bytes;
  s.block_size = c.rollout.kv_block_size;
  s.max_prefill_tokens = c.rollout.max_prefill_tokens;
  return s;
}

}  // namespace astraflow
