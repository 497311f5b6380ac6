#pragma once
// The continuous engine's scheduler state (include/astraflow/rollout/sequence_scheduler.hpp):
// sequences and their block tables, shared prompts, kept contexts and the block bookkeeping.
// sequence_scheduler.cpp admits and steps; scheduler_forward.cpp builds the paged forwards
// and samples. Private to src/rollout.
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "astraflow/model/device.hpp"
#include "astraflow/rollout/sequence_scheduler.hpp"
#include "rollout/kv_block_pool.hpp"

namespace astraflow {

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
  bool counted_waiting = false;      // counted in waiting_prompts (fresh at submit)
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

// An ended sequence's K/V kept for the one that continues it: its blocks (references held) and
// the context they hold the first `cached` positions of.
struct KeptContext {
  std::vector<std::int32_t> blocks;
  std::int64_t cached = 0;
  std::vector<std::int32_t> context;
};

// A prompt as a map key: its ids' bytes.
inline std::string keyOf(const std::vector<std::int32_t>& prompt) {
  return std::string(reinterpret_cast<const char*>(prompt.data()), prompt.size() * sizeof(std::int32_t));
}

// What an automatically sized pool (rollout.kv_cache_bytes 0) may take, and where that comes from.
// `strict`: fewer bytes than one full context is an error (a device), not a pool of one context
// anyway (the host, which swaps rather than fails).
struct KvBudget {
  std::int64_t bytes = 0;
  std::string source;
  bool strict = false;
};
// On CUDA rollout.kv_cache_fraction of the device's free memory (read after the engine's weights
// are placed: deviceMemory); on the CPU a quarter of the host's.
KvBudget automaticKvBudget(bool cuda, const DeviceMemory& memory, const SchedulerOptions& o);
// Blocks of the pool for a model and the options: kv_cache_bytes, or up to max_running full
// contexts within `automatic` (throws Error naming the keys).
std::int64_t poolBlocks(const ModelConfig& m, torch::ScalarType dtype, const SchedulerOptions& o,
                        const KvBudget& automatic);

}  // namespace engine_detail

struct SequenceScheduler::Impl {
  using Sequence = engine_detail::Sequence;
  using SharedPrompt = engine_detail::SharedPrompt;
  using KvBlockPool = engine_detail::KvBlockPool;
  Impl(PolicyModel m, std::int32_t pad, const SchedulerOptions& o)
      : model(std::move(m)),
        pad_id(pad),
        options(o),
        pool(model->config(), torch::TensorOptions().dtype(model->dtype()).device(model->device()),
             engine_detail::poolBlocks(
                 model->config(), model->dtype(), o,
                 engine_detail::automaticKvBudget(model->device().is_cuda(), deviceMemory(model->device()), o)),
             o.block_size) {
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
  std::unordered_map<std::string, int> waiting_prompts;   // fresh sequences waiting, by prompt
  std::map<SequenceId, engine_detail::KeptContext> kept;  // by id: oldest first
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

  void dropKept(std::map<SequenceId, engine_detail::KeptContext>::iterator it) {
    for (auto b : it->second.blocks) pool.release(b);
    kept.erase(it);
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
    // Kept contexts, and those already taken up by waiting continuations, hold old K/V too.
    counters.kept_dropped += kept.size();
    while (!kept.empty()) dropKept(kept.begin());
    for (auto& w : waiting) {
      if (!w->blocks.empty()) releaseBlocks(*w);
    }
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      releaseBlocks(**it);
      waiting.push_front(std::move(*it));
    }
    running.clear();
  }

  void finish(Sequence& s, std::vector<FinishedSequence>& done) {
    if (s.request.keep_kv && !s.out.nonfinite && !s.blocks.empty()) {
      // Its own references move to the kept context; a shared prompt's use is given up.
      engine_detail::KeptContext k{std::move(s.blocks), s.cached, s.request.prompt};
      k.context.insert(k.context.end(), s.out.tokens.begin(), s.out.tokens.end());
      kept.emplace(s.id, std::move(k));
      s.blocks.clear();
      s.cached = 0;
      dropPrompt(s);
    }
    releaseBlocks(s);
    s.finished = true;
    done.push_back({s.id, std::move(s.out)});
  }

  // A continuation takes the blocks of the context it extends, when its prompt starts with it.
  void takeUpKept(Sequence& s) {
    auto it = kept.find(s.request.continues);
    if (it == kept.end()) return;
    const auto& k = it->second;
    const auto& p = s.request.prompt;
    if (static_cast<std::int64_t>(p.size()) > k.cached &&
        std::equal(k.context.begin(), k.context.begin() + k.cached, p.begin())) {
      s.blocks = std::move(it->second.blocks);
      s.cached = k.cached;
      counters.reused_context_tokens += static_cast<std::uint64_t>(k.cached);
      kept.erase(it);
      return;
    }
    ++counters.kept_dropped;
    dropKept(it);
  }

  torch::Tensor prefill(const std::vector<Sequence*>& rows);
  torch::Tensor decode(const std::vector<Sequence*>& rows);
  void admit(std::vector<Sequence*>& to_prefill, std::vector<Sequence*>& to_share);
  void sample(const std::vector<Sequence*>& rows, const torch::Tensor& logits, std::vector<FinishedSequence>& done);
  std::vector<FinishedSequence> step();
};

}  // namespace astraflow
