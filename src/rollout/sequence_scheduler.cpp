// The continuous engine's scheduler (include/astraflow/rollout/sequence_scheduler.hpp): the
// sequences, their block tables, the shared prompts and the step. The forward passes are the
// model's paged ones (PolicyModelImpl::forwardPaged); sampling is token_sampler.cpp.
#include "astraflow/rollout/sequence_scheduler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <random>
#include <string>
#include <unordered_map>

#include "astraflow/core/error.hpp"
#include "rollout/kv_block_pool.hpp"
#include "rollout/token_sampler.hpp"

namespace astraflow {

using engine_detail::KvBlockPool;

namespace engine_detail {

struct Sequence {
  SequenceId id = 0;
  SequenceRequest request;
  Generation out;
  std::mt19937_64 rng;
  std::vector<std::int32_t> blocks;  // block table: position p is in blocks[p / block size]
  std::int64_t cached = 0;           // positions whose K/V are in the blocks
  std::int64_t budget = 0;           // tokens it may generate (its limit, within the context)
  std::string prompt_key;            // the shared prompt it holds a use of (empty: none)
  bool finished = false;

  std::int64_t contextLength() const { return static_cast<std::int64_t>(request.prompt.size() + out.tokens.size()); }
  std::int32_t token(std::int64_t position) const {
    const auto p = static_cast<std::size_t>(position);
    return p < request.prompt.size() ? request.prompt[p] : out.tokens[p - request.prompt.size()];
  }
  double uniform() { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
};

// A prompt's prefill, kept while sequences of it run: its blocks (one reference held here) and
// the logits its last position gave.
struct SharedPrompt {
  std::vector<std::int32_t> blocks;
  torch::Tensor logits;  // [V]
  int users = 0;
};

}  // namespace engine_detail

namespace {

using engine_detail::Sequence;
using engine_detail::SharedPrompt;

std::string keyOf(const std::vector<std::int32_t>& prompt) {
  return std::string(reinterpret_cast<const char*>(prompt.data()), prompt.size() * sizeof(std::int32_t));
}

std::int64_t hostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : std::int64_t{8} << 30;
}

std::int64_t poolBlocks(const ModelConfig& m, torch::ScalarType dtype, const SchedulerOptions& o) {
  const std::int64_t block_bytes = KvBlockPool::bytesPerBlock(m, dtype, o.block_size);
  const std::int64_t per_context = (m.max_seq_len + o.block_size - 1) / o.block_size;
  const std::int64_t least = per_context + 1;  // one full context and a copy-on-write block
  if (o.kv_cache_bytes == 0) {
    const std::int64_t wanted = static_cast<std::int64_t>(o.max_running) * (per_context + 1);
    return std::min(wanted, std::max(least, hostMemoryBytes() / 4 / block_bytes));
  }
  const std::int64_t blocks = o.kv_cache_bytes / block_bytes;
  if (blocks < least) {
    throw Error(
        fmt::format("rollout.kv_cache_bytes {} holds {} KV blocks of {} tokens ({} bytes each); one full context "
                    "(model.max_seq_len {}) needs {}: allowed 0 (sized automatically) or at least {} bytes",
                    o.kv_cache_bytes, blocks, o.block_size, block_bytes, m.max_seq_len, least, least * block_bytes));
  }
  return blocks;
}

}  // namespace

struct SequenceScheduler::Impl {
  Impl(PolicyModel m, std::int32_t pad, const SchedulerOptions& o)
      : model(std::move(m)),
        pad_id(pad),
        options(o),
        pool(model->config(), torch::TensorOptions().dtype(model->dtype()).device(model->device()),
             poolBlocks(model->config(), model->dtype(), o), o.block_size) {
    counters.kv_pool_bytes = pool.totalBlocks() * pool.bytesPerBlock();
  }

  PolicyModel model;
  std::int32_t pad_id;
  SchedulerOptions options;
  KvBlockPool pool;
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::vector<std::unique_ptr<Sequence>> running;  // in admission order
  std::vector<FinishedSequence> finished_early;    // nothing to generate: handed out by the next step
  std::unordered_map<std::string, SharedPrompt> prompts;
  std::unordered_map<std::string, int> waiting_prompts;  // fresh sequences waiting, by prompt
  SchedulerCounters counters;
  SequenceId next_id = 1;
  std::int64_t version = -1;  // the weights' version: each sampled token records it

  std::int64_t blocksFor(std::int64_t positions) const {
    return (positions + options.block_size - 1) / options.block_size;
  }
  std::int64_t slotOf(const Sequence& s, std::int64_t position) const {
    return pool.slot(s.blocks[static_cast<std::size_t>(position / options.block_size)], position % options.block_size);
  }

  void dropPrompt(Sequence& s) {
    if (s.prompt_key.empty()) return;
    auto it = prompts.find(s.prompt_key);
    if (it != prompts.end() && --it->second.users == 0) {
      for (auto b : it->second.blocks) pool.release(b);
      prompts.erase(it);
    }
    s.prompt_key.clear();
  }

  void releaseBlocks(Sequence& s) {
    for (auto b : s.blocks) pool.release(b);
    s.blocks.clear();
    s.cached = 0;
    dropPrompt(s);
  }

  // Room for the K/V of position `cached` (the token sampled last): a fresh block at a block
  // boundary, a private copy of a shared block. False when the pool has no block left.
  bool makeWritable(Sequence& s) {
    const auto index = static_cast<std::size_t>(s.cached / options.block_size);
    if (index == s.blocks.size()) {
      const auto b = pool.allocate();
      if (!b) return false;
      s.blocks.push_back(*b);
    } else if (pool.refs(s.blocks[index]) > 1) {
      const auto b = pool.allocate();
      if (!b) return false;
      pool.copySlots(s.blocks[index], *b, static_cast<int>(s.cached % options.block_size));
      pool.release(s.blocks[index]);
      s.blocks[index] = *b;
      ++counters.copied_blocks;
    }
    return true;
  }

  // Every running sequence gets room for its next position, oldest first (`running` is in
  // admission order); when the pool is full the youngest gives its blocks back and waits at the
  // head of the queue.
  void makeRoom() {
    for (std::size_t i = 0; i < running.size();) {
      if (makeWritable(*running[i])) {
        ++i;
        continue;
      }
      std::unique_ptr<Sequence> victim = std::move(running.back());
      running.pop_back();
      releaseBlocks(*victim);
      ++counters.preemptions;
      waiting.push_front(std::move(victim));
    }
  }

  // Every K/V in the pool is the old weights': the running sequences go back to the head of the
  // queue in admission order, keeping their tokens, to be prefilled again before their next one.
  // Releasing them drops every shared prompt (only running sequences hold one).
  void moveToNewWeights(std::int64_t new_version) {
    version = new_version;
    ++counters.version_changes;
    counters.moved_sequences += running.size();
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      releaseBlocks(**it);
      waiting.push_front(std::move(*it));
    }
    running.clear();
  }

  void finish(Sequence& s, std::vector<FinishedSequence>& done) {
    releaseBlocks(s);
    s.finished = true;
    done.push_back({s.id, std::move(s.out)});
  }

  torch::Tensor prefill(const std::vector<Sequence*>& rows);
  torch::Tensor decode(const std::vector<Sequence*>& rows);
  void admit(std::vector<Sequence*>& to_prefill, std::vector<Sequence*>& to_share);
  void sample(const std::vector<Sequence*>& rows, const torch::Tensor& logits, std::vector<FinishedSequence>& done);
  std::vector<FinishedSequence> step();
};

// Waiting sequences in order while a slot, the blocks and the prefill budget allow. A fresh
// sequence whose prompt is running already, or is prefilled in this step, shares it.
void SequenceScheduler::Impl::admit(std::vector<Sequence*>& to_prefill, std::vector<Sequence*>& to_share) {
  std::int64_t longest = 0;
  std::unordered_map<std::string, bool> in_this_step;
  while (!waiting.empty() && running.size() < static_cast<std::size_t>(options.max_running)) {
    Sequence& s = *waiting.front();
    const bool fresh = s.out.tokens.empty() && s.blocks.empty();
    const std::string key = fresh ? keyOf(s.request.prompt) : std::string();
    const bool shares = fresh && (prompts.count(key) > 0 || in_this_step.count(key) > 0);
    const std::int64_t need = shares ? 0 : blocksFor(s.contextLength());
    if (!shares) {
      const std::int64_t rows = static_cast<std::int64_t>(to_prefill.size()) + 1;
      const std::int64_t padded = rows * std::max(longest, s.contextLength());
      if (!to_prefill.empty() && padded > options.max_prefill_tokens) break;  // the next step takes it
    }
    if (need > pool.freeBlocks()) {
      ++counters.admission_waits;
      break;
    }
    for (std::int64_t i = 0; i < need; ++i) s.blocks.push_back(*pool.allocate());
    if (fresh && --waiting_prompts[key] == 0) waiting_prompts.erase(key);
    if (shares) {
      s.prompt_key = key;
      to_share.push_back(&s);
    } else {
      if (fresh) in_this_step[key] = true;
      longest = std::max(longest, s.contextLength());
      to_prefill.push_back(&s);
    }
    running.push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  counters.peak_running = std::max<std::uint64_t>(counters.peak_running, running.size());
}

// The whole context of each row (a prompt; a preempted sequence's prompt and tokens), right-
// padded; the logits of each row's last position [B,V].
torch::Tensor SequenceScheduler::Impl::prefill(const std::vector<Sequence*>& rows) {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t T = 0;
  for (const auto* s : rows) T = std::max(T, s->contextLength());
  auto tokens = torch::full({B, T}, pad_id, torch::kLong), positions = torch::zeros({B, T}, torch::kLong);
  auto valid = torch::zeros({B, T}, torch::kBool), last = torch::zeros({B}, torch::kLong);
  auto writes = torch::full({B * T}, KvBlockPool::kScratchSlot, torch::kLong);
  auto reads = torch::zeros({B * T}, torch::kLong);
  {
    auto tok = tokens.accessor<std::int64_t, 2>(), pos = positions.accessor<std::int64_t, 2>();
    auto val = valid.accessor<bool, 2>();
    auto w = writes.accessor<std::int64_t, 1>(), r = reads.accessor<std::int64_t, 1>();
    for (std::int64_t b = 0; b < B; ++b) {
      const Sequence& s = *rows[static_cast<std::size_t>(b)];
      const std::int64_t L = s.contextLength();
      for (std::int64_t t = 0; t < T; ++t) {
        const bool in = t < L;
        tok[b][t] = in ? s.token(t) : pad_id;
        pos[b][t] = in ? t : 0;  // a padding query sits at position 0, where the row's first key is
        val[b][t] = in;
        if (in) w[b * T + t] = slotOf(s, t);
        r[b * T + t] = slotOf(s, in ? t : 0);
      }
      last[b] = L - 1;
      counters.prefill_tokens += static_cast<std::uint64_t>(L);
      if (!s.out.tokens.empty()) counters.recomputed_tokens += static_cast<std::uint64_t>(L);
    }
  }
  const auto device = model->device();
  PagedKv kv{pool.keys(),          pool.values(),    writes.to(device), reads.to(device),
             positions.to(device), valid.to(device), last.to(device)};
  ++counters.prefill_forwards;
  auto logits = model->forwardPaged(tokens.to(device), kv.key_positions, kv.key_valid, kv).select(1, 0);
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

std::vector<FinishedSequence> SequenceScheduler::Impl::step() {
  // Never a graph: the pool's in-place writes would otherwise chain every step's activations to
  // the pool tensors, and a rank's memory would grow without end (measured: 11 GB in minutes).
  torch::NoGradGuard no_grad;
  std::vector<FinishedSequence> done = std::move(finished_early);
  finished_early.clear();
  ++counters.steps;
  makeRoom();
  std::vector<Sequence*> decoding;
  for (auto& s : running) decoding.push_back(s.get());
  std::vector<Sequence*> to_prefill, to_share;
  admit(to_prefill, to_share);

  std::vector<Sequence*> rows;
  std::vector<torch::Tensor> logits;
  if (!decoding.empty()) {
    logits.push_back(decode(decoding));
    rows.insert(rows.end(), decoding.begin(), decoding.end());
  }
  if (!to_prefill.empty()) {
    const auto prefilled = prefill(to_prefill);
    for (std::size_t i = 0; i < to_prefill.size(); ++i) {
      Sequence& s = *to_prefill[i];
      const std::string key = keyOf(s.request.prompt);
      const bool others =
          waiting_prompts.count(key) > 0 ||
          std::any_of(to_share.begin(), to_share.end(), [&](Sequence* o) { return o->prompt_key == key; });
      // Kept for the sequences of this prompt still to come: a fresh one's blocks and logits.
      if (s.out.tokens.empty() && others && prompts.count(key) == 0) {
        SharedPrompt& shared = prompts[key];
        shared.blocks = s.blocks;
        for (auto b : shared.blocks) pool.retain(b);
        shared.logits = prefilled[static_cast<std::int64_t>(i)].clone();
        shared.users = 1;
        s.prompt_key = key;
      }
    }
    logits.push_back(prefilled);
    rows.insert(rows.end(), to_prefill.begin(), to_prefill.end());
  }
  if (!to_share.empty()) {
    std::vector<torch::Tensor> shared_logits;
    for (auto* s : to_share) {
      SharedPrompt& shared = prompts.at(s->prompt_key);
      ++shared.users;
      s->blocks = shared.blocks;
      for (auto b : s->blocks) pool.retain(b);
      s->cached = static_cast<std::int64_t>(s->request.prompt.size());
      counters.shared_prompt_tokens += static_cast<std::uint64_t>(s->cached);
      shared_logits.push_back(shared.logits);
    }
    logits.push_back(torch::stack(shared_logits));
    rows.insert(rows.end(), to_share.begin(), to_share.end());
  }
  counters.peak_kv_bytes = std::max(counters.peak_kv_bytes, pool.peakUsedBlocks() * pool.bytesPerBlock());
  if (rows.empty()) return done;
  sample(rows, logits.size() == 1 ? logits.front() : torch::cat(logits, 0), done);
  // The finished sequences leave the running set, which stays in admission order.
  std::erase_if(running, [](const std::unique_ptr<Sequence>& s) { return s->finished; });
  return done;
}

SequenceScheduler::SequenceScheduler(PolicyModel model, std::int32_t pad_id, const SchedulerOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), pad_id, options)) {}
SequenceScheduler::~SequenceScheduler() = default;
SequenceScheduler::SequenceScheduler(SequenceScheduler&&) noexcept = default;
SequenceScheduler& SequenceScheduler::operator=(SequenceScheduler&&) noexcept = default;

SequenceId SequenceScheduler::submit(SequenceRequest request) {
  auto s = std::make_unique<Sequence>();
  s->id = impl_->next_id++;
  s->rng.seed(request.seed);
  const auto length = static_cast<std::int64_t>(request.prompt.size());
  const std::int64_t room = impl_->model->config().max_seq_len - length;
  s->budget = std::max<std::int64_t>(0, std::min<std::int64_t>(request.options.max_new_tokens, room));
  s->request = std::move(request);
  const SequenceId id = s->id;
  if (s->budget == 0 || length == 0) {
    impl_->finished_early.push_back({id, std::move(s->out)});
    return id;
  }
  ++impl_->waiting_prompts[keyOf(s->request.prompt)];
  impl_->waiting.push_back(std::move(s));
  return id;
}

std::vector<FinishedSequence> SequenceScheduler::step() { return impl_->step(); }
void SequenceScheduler::weightsChanged(std::int64_t version) { impl_->moveToNewWeights(version); }
std::int64_t SequenceScheduler::weightVersion() const { return impl_->version; }
bool SequenceScheduler::idle() const {
  return impl_->running.empty() && impl_->waiting.empty() && impl_->finished_early.empty();
}
std::size_t SequenceScheduler::running() const { return impl_->running.size(); }
std::size_t SequenceScheduler::waiting() const { return impl_->waiting.size(); }
const SchedulerCounters& SequenceScheduler::counters() const { return impl_->counters; }
std::int64_t SequenceScheduler::kvBytesInUse() const { return impl_->pool.usedBlocks() * impl_->pool.bytesPerBlock(); }

}  // namespace astraflow
