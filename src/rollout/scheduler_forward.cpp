// The continuous engine's forwards and sampling (scheduler_impl.hpp): each step's prefill and
// decode as paged forwards of the model (PolicyModelImpl::forwardPaged) over the rows' block
// tables, and one token per row from its own generator (token_sampler.cpp).
#include <algorithm>

#include "rollout/scheduler_impl.hpp"
#include "rollout/token_sampler.hpp"

namespace astraflow {

using engine_detail::KvBlockPool;
using engine_detail::Sequence;

// Each row's positions from `cached` on (a whole prompt; a preempted or moved sequence's prompt
// and tokens; a continuation's part after the context it took up), right-padded, attending to
// every position of the row; the logits of each row's last position [B,V].
torch::Tensor SequenceScheduler::Impl::prefill(const std::vector<Sequence*>& rows) {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t T = 0, K = 0;
  for (const auto* s : rows) {
    T = std::max(T, s->contextLength() - s->cached);
    K = std::max(K, s->contextLength());
  }
  auto tokens = torch::full({B, T}, pad_id, torch::kLong), positions = torch::zeros({B, T}, torch::kLong);
  auto valid = torch::zeros({B, T}, torch::kBool), last = torch::zeros({B}, torch::kLong);
  auto writes = torch::full({B * T}, KvBlockPool::kScratchSlot, torch::kLong);
  auto reads = torch::zeros({B * K}, torch::kLong), key_pos = torch::zeros({B, K}, torch::kLong);
  auto key_valid = torch::zeros({B, K}, torch::kBool);
  {
    auto tok = tokens.accessor<std::int64_t, 2>(), pos = positions.accessor<std::int64_t, 2>();
    auto val = valid.accessor<bool, 2>(), kv = key_valid.accessor<bool, 2>();
    auto w = writes.accessor<std::int64_t, 1>(), r = reads.accessor<std::int64_t, 1>();
    auto kp = key_pos.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const Sequence& s = *rows[static_cast<std::size_t>(b)];
      const std::int64_t L = s.contextLength(), from = s.cached, n = L - from;
      for (std::int64_t t = 0; t < T; ++t) {
        const bool in = t < n;
        tok[b][t] = in ? s.token(from + t) : pad_id;
        pos[b][t] = in ? from + t : 0;  // a padding query sits at position 0, where the row's first key is
        val[b][t] = in;
        if (in) w[b * T + t] = slotOf(s, from + t);
      }
      for (std::int64_t k = 0; k < K; ++k) {
        const bool in = k < L;
        r[b * K + k] = slotOf(s, in ? k : 0);
        kp[b][k] = in ? k : 0;
        kv[b][k] = in;
      }
      last[b] = n - 1;
      counters.prefill_tokens += static_cast<std::uint64_t>(n);
      if (!s.out.tokens.empty()) counters.recomputed_tokens += static_cast<std::uint64_t>(n);
    }
  }
  const auto device = model->device();
  PagedKv kv{pool.keys(),        pool.values(),        writes.to(device), reads.to(device),
             key_pos.to(device), key_valid.to(device), last.to(device)};
  ++counters.prefill_forwards;
  auto logits = model->forwardPaged(tokens.to(device), positions.to(device), valid.to(device), kv).select(1, 0);
  for (auto* s : rows) s->cached = s->contextLength();
  return logits;
}

// One new position per row: the token sampled last. Logits [B,V].
torch::Tensor SequenceScheduler::Impl::decode(const std::vector<Sequence*>& rows) {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t K = 0;
  for (const auto* s : rows) K = std::max(K, s->cached + 1);
  auto tokens = torch::zeros({B, 1}, torch::kLong), positions = torch::zeros({B, 1}, torch::kLong);
  auto writes = torch::zeros({B}, torch::kLong), reads = torch::zeros({B * K}, torch::kLong);
  auto key_pos = torch::zeros({B, K}, torch::kLong);
  auto key_valid = torch::zeros({B, K}, torch::kBool);
  {
    auto tok = tokens.accessor<std::int64_t, 2>(), pos = positions.accessor<std::int64_t, 2>();
    auto w = writes.accessor<std::int64_t, 1>(), r = reads.accessor<std::int64_t, 1>();
    auto kp = key_pos.accessor<std::int64_t, 2>();
    auto kv = key_valid.accessor<bool, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const Sequence& s = *rows[static_cast<std::size_t>(b)];
      tok[b][0] = s.token(s.cached);
      pos[b][0] = s.cached;
      w[b] = slotOf(s, s.cached);
      for (std::int64_t k = 0; k < K; ++k) {
        const bool in = k <= s.cached;
        r[b * K + k] = slotOf(s, in ? k : 0);
        kp[b][k] = in ? k : 0;
        kv[b][k] = in;
      }
    }
  }
  const auto device = model->device();
  PagedKv kv{pool.keys(), pool.values(), writes.to(device), reads.to(device), key_pos.to(device), key_valid.to(device),
             {}};
  ++counters.decode_forwards;
  counters.decode_tokens += static_cast<std::uint64_t>(B);
  auto logits =
      model->forwardPaged(tokens.to(device), positions.to(device), torch::ones({B, 1}, torch::kBool).to(device), kv)
          .select(1, 0);
  for (auto* s : rows) ++s->cached;
  return logits;
}

// One token for each row from its logits row; the sequences that end are finished.
void SequenceScheduler::Impl::sample(const std::vector<Sequence*>& rows, const torch::Tensor& logits,
                                     std::vector<FinishedSequence>& done) {
  std::vector<std::vector<std::int32_t>> masked(rows.size());
  std::vector<engine_detail::RowSampling> how(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Sequence& s = *rows[i];
    const SamplingOptions& o = s.request.options;
    masked[i] = o.banned_token_ids;
    // Too early to stop: the stop tokens cannot be drawn (the behaviour log-probs are those of
    // the distribution actually sampled from).
    if (static_cast<int>(s.out.tokens.size()) < o.min_new_tokens) {
      masked[i].insert(masked[i].end(), o.stop_token_ids.begin(), o.stop_token_ids.end());
    }
    how[i] = {o.temperature, o.top_p, o.greedy, &masked[i], s.uniform()};
  }
  const auto drawn = engine_detail::sampleRows(logits, how);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Sequence& s = *rows[i];
    const auto& d = drawn[i];
    bool ended = false;
    if (!d.finite) {
      s.out.nonfinite = ended = true;
    } else {
      s.out.tokens.push_back(d.token);
      s.out.logprobs.push_back(d.logprob);
      s.out.token_versions.push_back(version);
      const auto& stops = s.request.options.stop_token_ids;
      if (s.request.on_token && !s.request.on_token(d.token, d.logprob)) {
        s.out.stopped = s.out.ended_by_caller = ended = true;
      } else if (std::find(stops.begin(), stops.end(), d.token) != stops.end()) {
        s.out.stopped = ended = true;
      } else {
        ended = static_cast<std::int64_t>(s.out.tokens.size()) >= s.budget;  // out of room: unstopped
      }
    }
    if (ended) finish(s, done);
  }
}

}  // namespace astraflow
