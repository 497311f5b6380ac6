// The continuous engine's scheduler (include/astraflow/rollout/sequence_scheduler.hpp):
// admission (slots, blocks, shared prompts, continuations), the step, and the public calls. The
// state is scheduler_impl.hpp; the forwards and sampling are scheduler_forward.cpp.
#include "astraflow/rollout/sequence_scheduler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "astraflow/core/error.hpp"
#include "rollout/scheduler_impl.hpp"

namespace astraflow {

namespace engine_detail {

KvBudget automaticKvBudget(bool cuda, const DeviceMemory& memory, const SchedulerOptions& o) {
  if (cuda) {
    return {static_cast<std::int64_t>(o.kv_cache_fraction * static_cast<double>(memory.free)),
            fmt::format("rollout.kv_cache_fraction {} of the device's {:.2f} GiB free", o.kv_cache_fraction,
                        static_cast<double>(memory.free) / (1 << 30)),
            true};
  }
  // The CPU: a quarter of the host (its other ranks, weights and activations share it).
  return {static_cast<std::int64_t>((memory.total > 0 ? memory.total : std::uint64_t{8} << 30) / 4),
          "a quarter of the host's memory", false};
}

std::int64_t poolBlocks(const ModelConfig& m, torch::ScalarType dtype, const SchedulerOptions& o,
                        const KvBudget& automatic) {
  const std::int64_t block_bytes = KvBlockPool::bytesPerBlock(m, dtype, o.block_size);
  const std::int64_t per_context = (m.max_seq_len + o.block_size - 1) / o.block_size;
  const std::int64_t least = per_context + 1;  // one full context and a copy-on-write block
  if (o.kv_cache_bytes == 0) {
    const std::int64_t wanted = static_cast<std::int64_t>(o.max_running) * (per_context + 1);
    const std::int64_t fits = automatic.bytes / block_bytes;
    if (automatic.strict && fits < least) {
      throw Error(
          fmt::format("the KV pool gets {} ({} blocks of {} bytes); one full context (model.max_seq_len {}) "
                      "needs {} blocks: raise rollout.kv_cache_fraction (allowed up to 0.95), free the device, "
                      "or set rollout.kv_cache_bytes",
                      automatic.source, fits, block_bytes, m.max_seq_len, least));
    }
    return std::min(wanted, std::max(least, fits));
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

}  // namespace engine_detail

using engine_detail::keyOf;
using engine_detail::KvBlockPool;
using engine_detail::Sequence;
using engine_detail::SharedPrompt;

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
    // A continuation holds its context's blocks: it needs the rest, and a copy of a shared last one.
    const auto held = static_cast<std::int64_t>(s.blocks.size());
    const bool copies = held > 0 && s.cached % options.block_size != 0 &&
                        pool.refs(s.blocks[static_cast<std::size_t>(s.cached / options.block_size)]) > 1;
    const std::int64_t need = shares ? 0 : blocksFor(s.contextLength()) - held + (copies ? 1 : 0);
    if (!shares) {
      const std::int64_t rows = static_cast<std::int64_t>(to_prefill.size()) + 1;
      const std::int64_t padded = rows * std::max(longest, s.contextLength() - s.cached);
      if (!to_prefill.empty() && padded > options.max_prefill_tokens) break;  // the next step takes it
    }
    while (need > pool.freeBlocks() && !kept.empty()) {
      ++counters.kept_dropped;
      dropKept(kept.begin());
    }
    if (need > pool.freeBlocks()) {
      ++counters.admission_waits;
      break;
    }
    if (!shares) {
      if (held > 0) makeWritable(s);  // the block position `cached` goes into: fresh or a private copy
      while (static_cast<std::int64_t>(s.blocks.size()) < blocksFor(s.contextLength()))
        s.blocks.push_back(*pool.allocate());
    }
    if (s.counted_waiting) {
      s.counted_waiting = false;
      if (--waiting_prompts[keyOf(s.request.prompt)] == 0) waiting_prompts.erase(keyOf(s.request.prompt));
    }
    if (shares) {
      s.prompt_key = key;
      to_share.push_back(&s);
    } else {
      if (fresh) in_this_step[key] = true;
      longest = std::max(longest, s.contextLength() - s.cached);
      to_prefill.push_back(&s);
    }
    running.push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  counters.peak_running = std::max<std::uint64_t>(counters.peak_running, running.size());
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
  impl_->takeUpKept(*s);
  if (s->blocks.empty()) {
    s->counted_waiting = true;
    ++impl_->waiting_prompts[keyOf(s->request.prompt)];
  }
  impl_->waiting.push_back(std::move(s));
  return id;
}

std::vector<FinishedSequence> SequenceScheduler::step() { return impl_->step(); }
void SequenceScheduler::weightsChanged(std::int64_t version) { impl_->moveToNewWeights(version); }
void SequenceScheduler::release(SequenceId id) {
  if (auto it = impl_->kept.find(id); it != impl_->kept.end()) impl_->dropKept(it);
}
std::int64_t SequenceScheduler::weightVersion() const { return impl_->version; }
bool SequenceScheduler::idle() const {
  return impl_->running.empty() && impl_->waiting.empty() && impl_->finished_early.empty();
}
std::size_t SequenceScheduler::running() const { return impl_->running.size(); }
std::size_t SequenceScheduler::waiting() const { return impl_->waiting.size(); }
const SchedulerCounters& SequenceScheduler::counters() const { return impl_->counters; }
std::int64_t SequenceScheduler::kvBytesInUse() const { return impl_->pool.usedBlocks() * impl_->pool.bytesPerBlock(); }

}  // namespace astraflow
