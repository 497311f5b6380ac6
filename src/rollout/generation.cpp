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

// Prompts left-padded so every row's last prompt token is in the same column. Validity and
// positions come from the row lengths, never from token values. Built on the host.
struct LeftPadded {
  torch::Tensor tokens, valid, positions;
};

LeftPadded leftPad(const std::vector<std::vector<std::int32_t>>& prompts, std::int64_t longest, std::int32_t pad_id) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  LeftPadded out{torch::full({B, longest}, pad_id, torch::kLong), torch::zeros({B, longest}, torch::kBool),
                 torch::zeros({B, longest}, torch::kLong)};
  auto tok = out.tokens.accessor<std::int64_t, 2>();
  auto val = out.valid.accessor<bool, 2>();
  auto pos = out.positions.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<std::size_t>(b)];
    const auto off = longest - static_cast<std::int64_t>(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      tok[b][off + static_cast<std::int64_t>(i)] = p[i];
      val[b][off + static_cast<std::int64_t>(i)] = true;
      pos[b][off + static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(i);
    }
  }
  return out;
}

// Banned tokens never drawn; before min_new_tokens the stop tokens neither (the behaviour
// log-probs are those of the distribution actually sampled from).
torch::Tensor maskLogits(torch::Tensor logits, const SamplingOptions& o, std::int64_t step,
                         const torch::Tensor& banned) {
  if (banned.defined()) logits = logits.index_fill(-1, banned, -std::numeric_limits<float>::infinity());
  if (step < o.min_new_tokens && !o.stop_token_ids.empty()) {
    logits = logits.clone();
    for (auto t : o.stop_token_ids) logits.select(-1, t).fill_(-std::numeric_limits<float>::infinity());
  }
  return logits;
}

// The rows of a static batch between steps: what each generated, whether it is done, and the
// next step's input column (a row that is done steps on as padding).
class StaticRows {
 public:
  StaticRows(const std::vector<std::vector<std::int32_t>>& prompts, std::vector<std::int64_t> budget,
             std::int32_t pad_id)
      : out_(prompts.size()),
        budget_(std::move(budget)),
        done_(prompts.size()),
        next_pos_(prompts.size()),
        pad_id_(pad_id) {
    const auto B = static_cast<std::int64_t>(prompts.size());
    step_tok_ = torch::full({B, 1}, pad_id, torch::kLong);
    step_valid_ = torch::zeros({B, 1}, torch::kBool);
    step_pos_ = torch::zeros({B, 1}, torch::kLong);
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      next_pos_[b] = static_cast<std::int64_t>(prompts[b].size());
      done_[b] = budget_[b] == 0 || prompts[b].empty();
    }
  }

  // Takes one step's draws (on the host) into the rows; returns whether any row goes on.
  bool take(const torch::Tensor& next, const torch::Tensor& logp, const torch::Tensor& finite, const SamplingOptions& o,
            const RowControl& control) {
    auto next_a = next.accessor<std::int64_t, 1>();
    auto logp_a = logp.accessor<float, 1>();
    auto finite_a = finite.accessor<bool, 1>();
    auto tok_a = step_tok_.accessor<std::int64_t, 2>();
    auto valid_a = step_valid_.accessor<bool, 2>();
    auto pos_a = step_pos_.accessor<std::int64_t, 2>();
    bool any_active = false;
    for (std::size_t b = 0; b < out_.size(); ++b) {
      const auto r = static_cast<std::int64_t>(b);
      tok_a[r][0] = pad_id_;
      valid_a[r][0] = false;
      pos_a[r][0] = next_pos_[b];
      if (done_[b]) continue;
      if (!finite_a[r]) {
        out_[b].nonfinite = true;
        done_[b] = true;
        continue;
      }
      const auto tok = static_cast<std::int32_t>(next_a[r]);
      out_[b].tokens.push_back(tok);
      out_[b].logprobs.push_back(logp_a[r]);
      if (control.on_token && !control.on_token(b, tok, logp_a[r])) {
        out_[b].stopped = out_[b].ended_by_caller = true;
        done_[b] = true;
        continue;
      }
      if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), tok) != o.stop_token_ids.end()) {
        out_[b].stopped = true;
        done_[b] = true;
        continue;
      }
      if (static_cast<std::int64_t>(out_[b].tokens.size()) >= budget_[b]) {
        done_[b] = true;  // out of room: ends unstopped
        continue;
      }
      tok_a[r][0] = tok;
      valid_a[r][0] = true;
      next_pos_[b]++;
      any_active = true;
    }
    return any_active;
  }

  const torch::Tensor& stepTokens() const { return step_tok_; }
  const torch::Tensor& stepValid() const { return step_valid_; }
  const torch::Tensor& stepPositions() const { return step_pos_; }
  std::vector<Generation> release() { return std::move(out_); }

 private:
  std::vector<Generation> out_;
  std::vector<std::int64_t> budget_;
  std::vector<bool> done_;
  std::vector<std::int64_t> next_pos_;
  std::int32_t pad_id_;
  torch::Tensor step_tok_, step_valid_, step_pos_;
};

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
  if (B == 0) return {};
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
  // No room anywhere: nothing generated, not stopped.
  if (steps <= 0 || longest == 0) return std::vector<Generation>(prompts.size());

  // Built on the host, used where the model is (one small host→device copy per tensor).
  const auto device = model_->device();
  const LeftPadded padded = leftPad(prompts, longest, pad_id_);
  torch::Tensor all_tokens = padded.tokens.to(device), all_pos = padded.positions.to(device),
                all_valid = padded.valid.to(device);
  KvCache cache;
  torch::Tensor logits;
  if (o.use_kv_cache) {
    cache = model_->newCache(B, longest + steps);
    logits = model_->forwardCached(all_tokens, all_pos, all_valid, cache).select(1, longest - 1);
  } else {
    logits = model_->forward(all_tokens, all_pos, all_valid).select(1, longest - 1);
  }
  StaticRows rows(prompts, std::move(budget), pad_id_);
  const auto banned =
      o.banned_token_ids.empty()
          ? torch::Tensor()
          : torch::tensor(std::vector<std::int64_t>(o.banned_token_ids.begin(), o.banned_token_ids.end()), torch::kLong)
                .to(device);
  for (std::int64_t step = 0; step < steps; ++step) {
    auto [next_d, logp_d, finite_d] = sampleStep(maskLogits(logits, o, step, banned), o, gen);
    // The sampled tokens, their log-probs and flags come to the host (B values each): the
    // trajectory records and the stop logic need them there.
    if (!rows.take(next_d.to(torch::kCPU), logp_d.to(torch::kCPU), finite_d.to(torch::kCPU), o, control)) break;
    const auto tok_d = rows.stepTokens().to(device), pos_d = rows.stepPositions().to(device),
               valid_d = rows.stepValid().to(device);
    if (o.use_kv_cache) {
      logits = model_->forwardCached(tok_d, pos_d, valid_d, cache).select(1, 0);
    } else {
      all_tokens = torch::cat({all_tokens, tok_d}, 1);
      all_pos = torch::cat({all_pos, pos_d}, 1);
      all_valid = torch::cat({all_valid, valid_d}, 1);
      logits = model_->forward(all_tokens, all_pos, all_valid).select(1, all_tokens.size(1) - 1);
    }
  }
  return rows.release();
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
  s.kv_cache_fraction = c.rollout.kv_cache_fraction;
  s.block_size = c.rollout.kv_block_size;
  s.max_prefill_tokens = c.rollout.max_prefill_tokens;
  return s;
}

}  // namespace astraflow
