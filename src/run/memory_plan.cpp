// The memory plan (see the header; docs/memory.md says where each estimate comes from and how
// close it came to measured peaks).
#include "astraflow/run/memory_plan.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "astraflow/model/prepacked_weights.hpp"
#include "astraflow/weights/node_weights.hpp"

namespace astraflow {

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// What a rank holds before any of the items below, measured on this machine (docs/memory.md):
// its private memory (heap, allocator arenas, thread stacks, MPI's and HDF5's buffers: the
// dataflow rank's sampled RssAnon is 80 MiB, a rollout rank's before its model 65 MiB) and the
// pages of library code it runs (LibTorch and oneDNN for a rank that builds a model), which are
// file-backed and shared by the node's ranks through the page cache: the resident peaks (VmHWM)
// of the quickstart's rollout and dataflow ranks are 170 and 168 MiB.
constexpr std::uint64_t kModelRankPrivate = 100 * kMiB, kModelRankCode = 100 * kMiB;
constexpr std::uint64_t kPlainRankPrivate = 80 * kMiB, kPlainRankCode = 70 * kMiB;

void processItems(bool model, std::vector<MemoryItem>& out) {
  out.push_back({model ? "process: heap, LibTorch, MPI, HDF5" : "process: heap, MPI, HDF5",
                 model ? kModelRankPrivate : kPlainRankPrivate, ""});
  out.push_back({"process: library code (file-backed)", model ? kModelRankCode : kPlainRankCode, "", true});
}

std::uint64_t u(std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

struct Shape {
  std::int64_t params = 0, vocab = 0, d = 0, f = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, width = 0;
  std::uint64_t prepacked = 0;  // an fp32 CPU engine's prepacked weights (rollout.prepacked_weights)
  bool tied = false, eager = false;
};

Shape shapeOf(const ModelConfig& m, std::int64_t vocab) {
  Shape s;
  s.params = parameterCount(m, vocab);
  s.vocab = m.vocab_size > 0 ? m.vocab_size : vocab;
  s.d = m.d_model;
  s.f = m.ffn_hidden;
  s.layers = m.layers;
  s.heads = m.heads;
  s.kv_heads = m.kv_heads;
  s.head_dim = m.headDim();
  s.width = m.max_seq_len;
  s.tied = m.tied_embeddings;
  s.eager = m.attention == AttentionKind::Eager;
  ModelConfig sized = m;
  sized.vocab_size = s.vocab;
  s.prepacked = prepackedWeightBytes(sized);
  return s;
}

// Float32 bytes a training forward keeps per token and layer for the backward: the block's
// input and norms, q/k/v before and after rotary embedding, the attention output, what attention
// keeps for its backward, and the MLP's four F-wide products. Eager attention keeps its
// probabilities and mask (a row of `width` keys per head); sdpa passes no mask in the trainer's
// forward (model/attention_input.hpp), so its fused kernel keeps a log-sum-exp per head.
std::uint64_t activationBytesPerTokenLayer(const Shape& s) {
  const auto qkv = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const auto attention = s.eager ? 2 * s.heads * s.width : s.heads;
  return u(4 * (4 * s.d + 2 * qkv + s.heads * s.head_dim + attention + 4 * s.f));
}

// `stages`: this rank stages the group's versions (its first rank; PolicyTrainer::packWeights).
void trainerItems(const Config& cfg, const Shape& s, int group_size, bool stages, std::vector<MemoryItem>& out) {
  const auto& t = cfg.trainer;
  const auto P = u(s.params);
  const bool params_sharded = t.sharding == TrainerSection::Sharding::Parameters;
  const bool state_sharded = t.sharding != TrainerSection::Sharding::None;
  const auto n = static_cast<std::uint64_t>(std::max(1, group_size));
  const std::string shard_keys = "trainer.sharding (with more trainer ranks)";
  // Parameter sharding splits the blocks; the embedding, final norm and head (ZeroOptimizer's
  // units_[0]) stay whole on every rank, with their gradients (their AdamW state is split).
  const auto outside_blocks = std::min(P, u(s.vocab * s.d * (s.tied ? 1 : 2) + s.d));
  const auto held = params_sharded ? (P - outside_blocks) / n + outside_blocks : P;
  out.push_back({"weights (fp32 masters)", held * 4, shard_keys});
  out.push_back({"gradients (fp32)", held * 4, shard_keys});
  out.push_back({"AdamW state (fp32 m and v)", state_sharded ? P * 8 / n : P * 8, shard_keys});
  // The KL reference is sharded as the weights are (PolicyTrainer::freezeShardedReference).
  if (t.loss.kl_coef > 0)
    out.push_back({"KL reference model (fp32)", held * 4, "trainer.loss.kl_coef, trainer.sharding"});
  // One micro-batch's tokens: the configured budget, or the rank's share of the whole batch
  // (padded to the context: the estimate a long-tailed batch approaches).
  const auto batch_tokens = u(static_cast<std::int64_t>(t.groups_per_step) * cfg.rollout.group_size * s.width) / n + 1;
  const auto micro = t.micro_batch_tokens > 0 ? std::min(u(t.micro_batch_tokens), batch_tokens) : batch_tokens;
  const auto per_layer = activationBytesPerTokenLayer(s) * micro;
  const auto kept = t.activation_checkpointing ? u(s.layers) * micro * u(s.d) * 4 + per_layer : per_layer * u(s.layers);
  out.push_back({t.activation_checkpointing ? "activations (checkpointed: block inputs + one block)" : "activations",
                 kept, "trainer.micro_batch_tokens, trainer.activation_checkpointing"});
  // Logits: a chunk's (chunked_logprobs.cpp) or the whole micro-batch's, with its softmax and
  // gradient alive together in the backward.
  const auto whole_logits = micro * u(s.vocab) * 4;
  const auto logits = t.logits_chunk_bytes > 0 ? std::min(u(t.logits_chunk_bytes), whole_logits) : whole_logits;
  out.push_back({"logits (float32, x3 in the backward)", 3 * logits, "trainer.logits_chunk_bytes"});
  // The output projection's [V, D] float32 gradient, formed by the head's backward before it is
  // added into .grad (a tied embedding's rows are added into the same buffer: TiedGradient).
  out.push_back({"output head gradient transient", u(s.vocab) * u(s.d) * 4, ""});
  // Publishing: the packed bf16 version the group's first rank stages (packWeights converts into
  // it a parameter at a time; the others only send their shards). The staging area it writes is
  // the dataflow rank's window, counted there.
  if (stages) out.push_back({"weight publishing (packed bf16 version)", P * 2, ""});
}

// `node_readers`: the rollout ranks of this rank's node that share the policy's node copy
// (NodeWeights); 0 when this rank is not the one the copy is counted on. `relays_deltas`: the
// node has child nodes in the relay's tree and keeps the deltas it applies for them.
void rolloutItems(const Config& cfg, const Shape& s, const RolloutBackendSpec& backend, std::uint64_t host_bytes,
                  int node_readers, bool relays_deltas, std::vector<MemoryItem>& out) {
  const auto P = u(s.params);
  if (node_readers > 0) {
    const int slots = node_readers == 1 ? 1 : 2;
    out.push_back({fmt::format("node-shared version (bf16 x{}, for the node's {} rollout ranks)", slots, node_readers),
                   P * 2 * static_cast<std::uint64_t>(slots), "", true});
    if (relays_deltas)
      out.push_back(
          {"relayed deltas (a node with child nodes)", relayDeltaRingBytes(P * 2), "weights.relay_fanout", true});
  }
  if (backend.kind != BackendKind::Engine) {
    if (backend.http()) out.push_back({"served weight folder (bf16, written per version)", P * 2, ""});
    return;
  }
  const auto& r = cfg.rollout;
  const std::uint64_t elem = r.compute.engineBf16(s.params) ? 2 : 4;
  // bf16 on the CPU computes from the node's copy in place; otherwise the engine holds its own.
  if (elem == 4 || r.compute.device.cuda())
    out.push_back({fmt::format("engine weights ({})", elem == 2 ? "bf16" : "fp32"), P * elem, "rollout.precision"});
  if (elem == 4 && !r.compute.device.cuda() && r.prepacked_weights && s.prepacked > 0)
    out.push_back({"prepacked engine weights (MKL's GEMM layout)", s.prepacked, "rollout.prepacked_weights"});
  // The KV block pool, sized as the engine sizes it (sequence_scheduler.cpp poolBlocks).
  const auto block = static_cast<std::uint64_t>(std::max(1, r.kv_block_size));
  const auto block_bytes = 2 * u(s.layers) * u(s.kv_heads) * u(s.head_dim) * block * elem;
  const auto per_context = (u(s.width) + block - 1) / block;
  std::uint64_t blocks = r.kv_cache_bytes > 0 ? u(r.kv_cache_bytes) / block_bytes
                                              : std::min(u(r.max_running) * (per_context + 1),
                                                         std::max(per_context + 1, host_bytes / 4 / block_bytes));
  out.push_back({"KV block pool", (blocks + 1) * block_bytes, "rollout.kv_cache_bytes, rollout.max_running"});
  // A prefill forward's activations (no graph: a layer's at a time) and the step's logits.
  const auto prefill = std::min<std::uint64_t>(u(r.max_prefill_tokens), u(r.max_running) * u(s.width));
  out.push_back({"prefill activations and logits",
                 prefill * activationBytesPerTokenLayer(s) / 2 * elem / 4 + 3 * u(r.max_running) * u(s.vocab) * 4,
                 "rollout.max_prefill_tokens, rollout.max_running"});
}

std::uint64_t ringBytes(const RingSection& r) { return 64 + r.slots * (8 + r.slot_bytes); }

void dataflowItems(const Config& cfg, const RoleMap& map, std::int64_t vocab, std::vector<MemoryItem>& out) {
  for (const auto& g : map.trainerGroups()) {
    const auto* p = cfg.findPolicy(g.policy);
    if (!p) continue;
    const auto version = cfg.trainer.simulate.enabled && cfg.trainer.simulate.weight_bytes > 0
                             ? u(cfg.trainer.simulate.weight_bytes)
                             : u(parameterCount(p->model, vocab)) * 2;
    // The store's window: published + staging copies, and the delta log (weights.mode delta).
    const auto copies = cfg.weights.mode == WeightsMode::Delta ? 3 : 2;
    out.push_back({"weight store " + g.policy + " (bf16 version x" + std::to_string(copies) + ")", version * copies,
                   "weights.mode", true});
  }
  std::uint64_t rings = 0;
  for (std::size_t i = 0; i < map.pools().size(); ++i)
    rings += ringBytes(cfg.dataflow.task_ring) + ringBytes(cfg.dataflow.trajectory_ring);
  rings += map.trainerGroups().size() * ringBytes(cfg.dataflow.batch_ring);
  out.push_back({"rings (task, trajectory, batch windows)", rings, "dataflow.*_ring.slots, slot_bytes", true});
}

std::uint64_t readMeminfo(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  std::uint64_t kib = 0;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == key) return kib * 1024;
  }
  return 0;
}

std::uint64_t readNumber(const std::string& path, bool& ok) {
  std::ifstream in(path);
  std::string text;
  ok = static_cast<bool>(in >> text) && text != "max";
  if (!ok) return 0;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    ok = false;
    return 0;
  }
}

}  // namespace

std::uint64_t RankMemoryPlan::total() const {
  std::uint64_t sum = 0;
  for (const auto& i : items) sum += i.bytes;
  return sum;
}

std::uint64_t RankMemoryPlan::privateTotal() const {
  std::uint64_t sum = 0;
  for (const auto& i : items) sum += i.shared ? 0 : i.bytes;
  return sum;
}

std::string gib(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  return bytes >= (std::uint64_t{1} << 30) ? fmt::format("{:.2f} GiB", b / (1 << 30))
                                           : fmt::format("{:.1f} MiB", b / (1 << 20));
}

std::vector<RankMemoryPlan> planMemory(const Config& cfg, const RoleMap& map, std::int64_t vocab,
                                       std::uint64_t host_bytes, const std::vector<int>& node_of) {
  auto nodeOf = [&](int world_rank) {
    return static_cast<std::size_t>(world_rank) < node_of.size() ? node_of[static_cast<std::size_t>(world_rank)] : 0;
  };
  // Each policy's node copy is counted once per node, on the node's first rollout rank serving it.
  std::map<std::pair<int, std::string>, std::pair<int, int>> copies;  // (node, policy) -> (first rank, readers)
  for (const auto& rr : map.ranks()) {
    if (rr.role != Role::Rollout) continue;
    for (const auto& name : rr.policies) {
      auto [it, fresh] = copies.try_emplace({nodeOf(rr.world_rank), name}, rr.world_rank, 0);
      it->second.second++;
    }
  }
  // The copies that keep relayed deltas: those with child nodes in each policy's tree, whose
  // nodes are numbered by their first rank (NodeRelay's numbering).
  std::map<std::pair<int, std::string>, bool> relays_deltas;
  if (cfg.weights.relay_fanout > 0 && cfg.weights.mode == WeightsMode::Delta) {
    std::map<std::string, std::vector<std::pair<int, int>>> firsts;  // policy -> (first rank, node)
    for (const auto& [key, copy] : copies) firsts[key.second].push_back({copy.first, key.first});
    for (auto& [name, nodes] : firsts) {
      std::sort(nodes.begin(), nodes.end());
      for (std::size_t j = 0; j < nodes.size(); ++j) {
        const NodeNumbering numbering{static_cast<int>(j), static_cast<int>(nodes.size()), {}};
        relays_deltas[{nodes[j].second, name}] = numbering.hasChildren(cfg.weights.relay_fanout);
      }
    }
  }
  std::vector<RankMemoryPlan> out;
  for (const auto& rr : map.ranks()) {
    RankMemoryPlan plan{rr.world_rank, rr.label(), {}};
    switch (rr.role) {
      case Role::Trainer: {
        const auto* p = cfg.findPolicy(rr.policy);
        const bool model = p && !cfg.trainer.simulate.enabled;
        processItems(model, plan.items);
        if (model) {
          int group = 1;
          bool stages = true;
          for (const auto& g : map.trainerGroups()) {
            if (g.policy != rr.policy) continue;
            group = static_cast<int>(g.world_ranks.size());
            stages = g.world_ranks.front() == rr.world_rank;
          }
          trainerItems(cfg, shapeOf(p->model, vocab), group, stages, plan.items);
        }
        break;
      }
      case Role::Rollout: {
        RolloutBackendSpec backend;
        for (const auto& e : cfg.layout)
          if (e.role == Role::Rollout && e.pool == rr.pool_name) backend = e.backend;
        const bool model = backend.kind == BackendKind::Engine;
        processItems(model, plan.items);
        for (const auto& name : rr.policies) {
          const auto& [first, readers] = copies.at({nodeOf(rr.world_rank), name});
          const bool mine = first == rr.world_rank;
          const bool keeps = mine && relays_deltas[{nodeOf(rr.world_rank), name}];
          if (const auto* p = cfg.findPolicy(name))
            rolloutItems(cfg, shapeOf(p->model, vocab), backend, host_bytes, mine ? readers : 0, keeps, plan.items);
        }
        break;
      }
      default:  // dataflow, gateway
        processItems(false, plan.items);
        dataflowItems(cfg, map, vocab, plan.items);
        break;
    }
    out.push_back(std::move(plan));
  }
  return out;
}

std::uint64_t hostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

namespace {

std::uint64_t statusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size())) * 1024;  // kB
  }
  return 0;
}

}  // namespace

std::uint64_t currentResidentBytes() { return statusBytes("VmRSS:"); }
std::uint64_t peakResidentBytes() { return statusBytes("VmHWM:"); }

NodeMemory nodeMemory() {
  NodeMemory m{readMeminfo("MemAvailable:"), "MemAvailable"};
  if (m.available == 0) m = {hostMemoryBytes(), "physical memory"};
  bool has_limit = false, has_use = false;
  const auto limit = readNumber("/sys/fs/cgroup/memory.max", has_limit);
  const auto used = readNumber("/sys/fs/cgroup/memory.current", has_use);
  if (has_limit && has_use && limit > used && limit - used < m.available) m = {limit - used, "cgroup memory.max"};
  return m;
}

std::string formatMemoryPlan(const std::vector<RankMemoryPlan>& ranks, std::uint64_t capacity,
                             const std::string& capacity_source) {
  std::ostringstream os;
  std::uint64_t sum = 0;
  for (const auto& r : ranks) {
    os << fmt::format("  rank {} {:<24} {:>12}\n", r.world_rank, r.label, gib(r.total()));
    for (const auto& i : r.items) {
      os << fmt::format("      {:<52} {:>12}{}{}\n", i.what, gib(i.bytes), i.shared ? "  node-shared" : "",
                        i.shrink.empty() ? "" : "  (" + i.shrink + ")");
    }
    sum += r.total();
  }
  os << fmt::format("  total {} for {} rank(s); this node has {} ({}): {}\n", gib(sum), ranks.size(), gib(capacity),
                    capacity_source, sum <= capacity ? "fits" : "does NOT fit");
  return os.str();
}

std::string memoryRefusal(const std::vector<RankMemoryPlan>& node_ranks, const std::string& node,
                          std::uint64_t capacity, const std::string& capacity_source) {
  std::uint64_t sum = 0;
  struct Big {
    std::uint64_t bytes;
    std::string text;
  };
  std::vector<Big> items;
  for (const auto& r : node_ranks) {
    sum += r.total();
    for (const auto& i : r.items) {
      items.push_back({i.bytes, fmt::format("{} {} ({}{})", r.label, i.what, gib(i.bytes),
                                            i.shrink.empty() ? "" : "; shrink with " + i.shrink)});
    }
  }
  if (sum <= capacity) return {};
  std::sort(items.begin(), items.end(), [](const Big& a, const Big& b) { return a.bytes > b.bytes; });
  std::string largest;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, items.size()); ++i) largest += "\n    " + items[i].text;
  return fmt::format(
      "memory plan: node {} would need {} for its {} rank(s) but has {} ({}). Largest items:{}\n  Also: fewer "
      "rollout ranks per node, rollout.precision: bf16. `astraflow plan CONFIG` prints the whole plan; "
      "run.memory_check: warn starts anyway.",
      node, gib(sum), node_ranks.size(), gib(capacity), capacity_source, largest);
}

}  // namespace astraflow
