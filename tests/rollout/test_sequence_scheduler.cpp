// The continuous engine (rollout/sequence_scheduler.hpp) against the static engine run on one
// sequence at a time: the same greedy ids and log-probs within 1e-5 with sequences admitted
// mid-stream, with the pool so small that sequences are preempted and recomputed, and with a
// group's prompt prefilled once and its blocks shared; a seeded sequence draws the same tokens
// whatever runs beside it; KV memory follows live tokens; a pool too small is refused by name.
#include <gtest/gtest.h>

#include "test_model_config.hpp"

#include <algorithm>
#include <map>

#include "astraflow/core/error.hpp"
#include "astraflow/rollout/generation.hpp"
#include "astraflow/rollout/sequence_scheduler.hpp"
#include "rollout/scheduler_impl.hpp"

using namespace astraflow;

namespace {

constexpr int kBlock = 4;
ModelConfig schedulerModel() { return test_support::tinyModel(61, 32, 2, 4, 2, 64, 64); }

std::int64_t blockBytes(const ModelConfig& m) {
  return 2 * static_cast<std::int64_t>(m.layers) * m.kv_heads * m.headDim() * kBlock * 4;  // fp32
}

// Prompts of 1 to 13 tokens, limits from 2 to 19 tokens: lengths spread as a long tail does.
std::vector<std::vector<std::int32_t>> spreadPrompts(int n) {
  std::vector<std::vector<std::int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::int32_t> p{1};
    for (int k = 0; k < (i * 5) % 13; ++k) p.push_back(2 + (i * 7 + k * 3) % 57);
    out.push_back(p);
  }
  return out;
}
int limitOf(std::size_t i) { return 2 + static_cast<int>((i * 11) % 18); }

struct Reference {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
};

// Each prompt alone through the static engine, greedy.
std::vector<Reference> aloneGreedy(GenerationEngine& engine, const std::vector<std::vector<std::int32_t>>& prompts) {
  std::vector<Reference> out;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    SamplingOptions o;
    o.greedy = true;
    o.max_new_tokens = limitOf(i);
    auto g = at::detail::createCPUGenerator(1);
    const auto r = engine.generateStatic({prompts[i]}, o, g);
    out.push_back({r[0].tokens, r[0].logprobs});
  }
  return out;
}

// Every prompt submitted at once (greedy, limit(i) tokens, keeping its K/V when `keep`); the
// prompt index of each sequence.
std::map<SequenceId, std::size_t> submitAll(SequenceScheduler& s, const std::vector<std::vector<std::int32_t>>& prompts,
                                            int (*limit)(std::size_t) = limitOf, bool keep = false) {
  std::map<SequenceId, std::size_t> row;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    SequenceRequest r;
    r.prompt = prompts[i];
    r.options.greedy = true;
    r.options.max_new_tokens = limit(i);
    r.keep_kv = keep;
    row[s.submit(std::move(r))] = i;
  }
  return row;
}

// submitAll, then steps until all have ended; returns the generations by prompt.
std::vector<Generation> runAll(SequenceScheduler& s, const std::vector<std::vector<std::int32_t>>& prompts) {
  const auto row = submitAll(s, prompts);
  std::vector<Generation> out(prompts.size());
  while (!s.idle()) {
    for (auto& f : s.step()) out[row.at(f.id)] = std::move(f.generation);
  }
  return out;
}

void expectSameAsAlone(const std::vector<Generation>& got, const std::vector<Reference>& alone) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i].tokens) << "sequence " << i;
    ASSERT_EQ(got[i].logprobs.size(), alone[i].logprobs.size()) << "sequence " << i;
    for (std::size_t k = 0; k < got[i].logprobs.size(); ++k) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i].logprobs[k] - alone[i].logprobs[k])));
    }
  }
  EXPECT_LT(worst, 1e-5);
}

}  // namespace

TEST(SequenceScheduler, AdmittedMidStreamEachSequenceIsWhatItIsAlone) {
  torch::manual_seed(21);
  PolicyModel model(schedulerModel());
  GenerationEngine engine(model, 0);
  const auto prompts = spreadPrompts(14);
  const auto alone = aloneGreedy(engine, prompts);
  SequenceScheduler s(model, 0, {/*max_running=*/3, /*kv_cache_bytes=*/0, kBlock});
  expectSameAsAlone(runAll(s, prompts), alone);
  const auto& c = s.counters();
  EXPECT_EQ(c.peak_running, 3u);
  EXPECT_GT(c.prefill_forwards, 3u) << "sequences joined as others ended";
  EXPECT_EQ(c.preemptions, 0u);
}

TEST(SequenceScheduler, AFullPoolPreemptsTheYoungestAndItsRecomputationChangesNothing) {
  torch::manual_seed(22);
  const ModelConfig m = schedulerModel();
  PolicyModel model(m);
  GenerationEngine engine(model, 0);
  const auto prompts = spreadPrompts(10);
  const auto alone = aloneGreedy(engine, prompts);
  // The least pool allowed: one full context (64 positions: 16 blocks) and one block more.
  SequenceScheduler s(model, 0, {8, 17 * blockBytes(m), kBlock});
  expectSameAsAlone(runAll(s, prompts), alone);
  const auto& c = s.counters();
  EXPECT_GT(c.preemptions, 0u);
  EXPECT_GT(c.recomputed_tokens, 0u);
  EXPECT_LE(c.peak_kv_bytes, c.kv_pool_bytes);
  EXPECT_EQ(s.kvBytesInUse(), 0) << "every block back once all ended";
}

TEST(SequenceScheduler, AGroupPrefillsItsPromptOnceAndSharesItsBlocks) {
  torch::manual_seed(23);
  const ModelConfig m = schedulerModel();
  PolicyModel model(m);
  const std::vector<std::int32_t> prompt{1, 8, 9, 10, 11, 12, 13, 14, 15, 16};  // 10: 2.5 blocks
  constexpr int kGroup = 8;
  auto run = [&](bool same_prompt, std::vector<Generation>& out) {
    SequenceScheduler s(model, 0, {kGroup, 0, kBlock});
    std::map<SequenceId, std::size_t> row;
    for (int i = 0; i < kGroup; ++i) {
      SequenceRequest r;
      r.prompt = prompt;
      if (!same_prompt) r.prompt.back() = static_cast<std::int32_t>(20 + i);
      r.options.temperature = 0.9;
      r.options.max_new_tokens = 12;
      r.seed = 100 + static_cast<std::uint64_t>(i);
      row[s.submit(std::move(r))] = static_cast<std::size_t>(i);
    }
    out.assign(kGroup, {});
    while (!s.idle()) {
      for (auto& f : s.step()) out[row.at(f.id)] = std::move(f.generation);
    }
    return s.counters();
  };
  std::vector<Generation> shared, separate;
  const auto c = run(true, shared);
  const auto d = run(false, separate);
  EXPECT_EQ(c.prefill_tokens, prompt.size()) << "the prompt prefilled once";
  EXPECT_EQ(c.shared_prompt_tokens, (kGroup - 1) * prompt.size());
  EXPECT_EQ(d.prefill_tokens, kGroup * prompt.size());
  EXPECT_LT(c.peak_kv_bytes, d.peak_kv_bytes);
  EXPECT_GE(c.copied_blocks, static_cast<std::uint64_t>(kGroup)) << "each takes a copy of the half-filled block";
  // Each shared sequence equals the same seed run alone: shared KV is the KV it computes itself.
  for (int i = 0; i < kGroup; ++i) {
    SequenceScheduler alone(model, 0, {1, 0, kBlock});
    SequenceRequest r;
    r.prompt = prompt;
    r.options.temperature = 0.9;
    r.options.max_new_tokens = 12;
    r.seed = 100 + static_cast<std::uint64_t>(i);
    alone.submit(std::move(r));
    std::vector<FinishedSequence> done;
    while (!alone.idle()) {
      for (auto& f : alone.step()) done.push_back(std::move(f));
    }
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(shared[static_cast<std::size_t>(i)].tokens, done[0].generation.tokens) << "sample " << i;
    for (std::size_t k = 0; k < done[0].generation.logprobs.size(); ++k)
      EXPECT_NEAR(shared[static_cast<std::size_t>(i)].logprobs[k], done[0].generation.logprobs[k], 1e-5);
  }
}

TEST(SequenceScheduler, ASeededSequenceDrawsTheSameTokensWhateverRunsBesideIt) {
  torch::manual_seed(24);
  PolicyModel model(schedulerModel());
  auto draw = [&](int neighbours) {
    SequenceScheduler s(model, 0, {8, 0, kBlock});
    SequenceRequest r;
    r.prompt = {1, 30, 31, 32};
    r.options.temperature = 1.3;
    r.options.top_p = 0.9;
    r.options.max_new_tokens = 20;
    r.seed = 77;
    const SequenceId id = s.submit(r);
    for (int i = 0; i < neighbours; ++i) {
      SequenceRequest n = r;
      n.prompt.push_back(static_cast<std::int32_t>(40 + i));
      n.seed = static_cast<std::uint64_t>(i);
      n.options.max_new_tokens = 3 + 5 * i;
      s.submit(n);
    }
    Generation mine;
    while (!s.idle()) {
      for (auto& f : s.step()) {
        if (f.id == id) mine = std::move(f.generation);
      }
    }
    return mine.tokens;
  };
  const auto alone = draw(0);
  EXPECT_EQ(alone.size(), 20u);
  EXPECT_EQ(draw(5), alone);
  EXPECT_EQ(draw(7), alone);
}

TEST(SequenceScheduler, KvMemoryFollowsLiveTokensAndASmallPoolIsRefusedByName) {
  torch::manual_seed(25);
  const ModelConfig m = schedulerModel();
  PolicyModel model(m);
  SequenceScheduler s(model, 0, {4, 0, kBlock});
  runAll(s, spreadPrompts(12));
  // Four sequences of at most 13 + 19 tokens live at once: 8 blocks each and a copy, not
  // max_running × max_seq_len.
  EXPECT_LE(s.counters().peak_kv_bytes, 4 * 9 * blockBytes(m));
  EXPECT_GT(s.counters().kv_pool_bytes, s.counters().peak_kv_bytes);
  try {
    SequenceScheduler tiny(model, 0, {4, 3 * blockBytes(m), kBlock});
    FAIL() << "a pool of 3 blocks cannot hold a 64-position context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.kv_cache_bytes"), std::string::npos) << e.what();
  }
}

// Sized automatically, a CUDA engine's pool takes rollout.kv_cache_fraction of what its device
// reports free (up to max_running full contexts), and too little for one context is an error
// naming the key; the CPU's takes up to a quarter of the host, never less than one context.
TEST(SequenceScheduler, AnAutomaticPoolIsSizedFromTheDevicesReportedMemory) {
  using namespace engine_detail;
  const ModelConfig m = schedulerModel();
  const auto block = static_cast<std::uint64_t>(blockBytes(m));
  const std::int64_t context = (m.max_seq_len + kBlock - 1) / kBlock + 1;  // blocks of one full context
  SchedulerOptions o{1000, 0, kBlock};
  o.kv_cache_fraction = 0.5;
  const auto device = automaticKvBudget(true, DeviceMemory{100 * block, 1000 * block}, o);
  EXPECT_EQ(poolBlocks(m, torch::kFloat32, o, device), 50);
  o.max_running = 2;
  EXPECT_EQ(poolBlocks(m, torch::kFloat32, o, device), 2 * context);
  try {
    poolBlocks(m, torch::kFloat32, o, automaticKvBudget(true, DeviceMemory{block * 2 * (context - 1), 0}, o));
    FAIL() << "a device with room for less than one context gave a pool";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.kv_cache_fraction"), std::string::npos) << e.what();
  }
  o.max_running = 1000;
  const auto host = automaticKvBudget(false, DeviceMemory{0, 4 * 40 * block}, o);
  EXPECT_EQ(poolBlocks(m, torch::kFloat32, o, host), 40);
  EXPECT_EQ(poolBlocks(m, torch::kFloat32, o, automaticKvBudget(false, DeviceMemory{0, block}, o)), context);
  // This host, as the engine reads it.
  const DeviceMemory here = deviceMemory(torch::kCPU);
  EXPECT_GT(here.total, here.free);
  EXPECT_GT(here.free, 0u);
}

// A caller stepping the scheduler with gradients on (a rollout rank's EpisodeStream) gets no
// graph: the step runs under no-grad, seen from the token callback inside it. With a graph, the
// pool's in-place writes chained every step's activations together (a rank grew to 11 GB).
TEST(SequenceScheduler, StepsNeverBuildAGraph) {
  torch::manual_seed(26);
  PolicyModel model(schedulerModel());
  ASSERT_TRUE(torch::GradMode::is_enabled());
  SequenceScheduler s(model, 0, {2, 0, kBlock});
  SequenceRequest r;
  r.prompt = {1, 2, 3};
  r.options.max_new_tokens = 5;
  int calls = 0;
  bool grad_seen = false;
  r.on_token = [&](std::int32_t, float) {
    ++calls;
    grad_seen = grad_seen || torch::GradMode::is_enabled();
    return true;
  };
  s.submit(r);
  while (!s.idle()) s.step();
  EXPECT_EQ(calls, 5);
  EXPECT_FALSE(grad_seen);
}

namespace {

void copyWeights(PolicyModel& into, const PolicyModel& from) {
  torch::NoGradGuard no_grad;
  const auto dst = into->parameters(), src = from->parameters();
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
}

// The log-prob of each generated token under `model` at `temperature`, scored by a full forward
// of the prompt and the tokens: what a trainer computes for them.
std::vector<float> scored(PolicyModel& model, const std::vector<std::int32_t>& prompt, const Generation& g,
                          double temperature) {
  torch::NoGradGuard no_grad;
  std::vector<std::int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), g.tokens.begin(), g.tokens.end());
  const auto T = static_cast<std::int64_t>(ids.size());
  const auto tokens = torch::tensor(ids, torch::kLong).unsqueeze(0);
  const auto logits = model->forward(tokens, torch::arange(T).unsqueeze(0), torch::ones({1, T}, torch::kBool));
  const auto logp = torch::log_softmax(logits[0].to(torch::kDouble) / temperature, -1);
  std::vector<float> out;
  for (std::size_t k = 0; k < g.tokens.size(); ++k) {
    const auto at = static_cast<std::int64_t>(prompt.size() + k) - 1;
    out.push_back(static_cast<float>(logp[at][g.tokens[k]].item<double>()));
  }
  return out;
}

}  // namespace

// rollout.on_new_version: continue. The weights change under running sequences after a few
// steps: each sequence keeps its tokens, goes on under the new weights from its next token, and
// every token records the version that sampled it. Greedy: the ids are those of the old
// weights' alone run up to the change, then the new weights' alone run from there; sampled:
// each token's log-prob is the one its own version gives it.
TEST(SequenceScheduler, ContinuingAcrossAVersionEachTokenIsItsOwnVersions) {
  torch::manual_seed(27);
  const ModelConfig m = schedulerModel();
  PolicyModel old_weights(m), new_weights(m), model(m);
  copyWeights(model, old_weights);
  GenerationEngine old_engine(old_weights, 0), new_engine(new_weights, 0);
  const auto prompts = spreadPrompts(9);
  SequenceScheduler s(model, 0, {4, 0, kBlock});
  s.weightsChanged(5);
  const auto row = submitAll(s, prompts);
  std::vector<Generation> got(prompts.size());
  for (int k = 0; k < 4; ++k) {
    for (auto& f : s.step()) got[row.at(f.id)] = std::move(f.generation);
  }
  const std::size_t moving = s.running();
  ASSERT_GT(moving, 0u);
  copyWeights(model, new_weights);
  s.weightsChanged(6);
  while (!s.idle()) {
    for (auto& f : s.step()) got[row.at(f.id)] = std::move(f.generation);
  }
  EXPECT_EQ(s.counters().moved_sequences, moving);
  EXPECT_EQ(s.weightVersion(), 6);

  std::size_t spanning = 0;
  double worst = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Generation& g = got[i];
    ASSERT_EQ(g.token_versions.size(), g.tokens.size());
    const auto before = static_cast<std::size_t>(std::count(g.token_versions.begin(), g.token_versions.end(), 5));
    // The old version's tokens first, then the new one's.
    for (std::size_t k = 0; k < g.tokens.size(); ++k) EXPECT_EQ(g.token_versions[k], k < before ? 5 : 6);
    if (before > 0 && before < g.tokens.size()) ++spanning;
    auto g0 = at::detail::createCPUGenerator(1);
    SamplingOptions o;
    o.greedy = true;
    o.max_new_tokens = static_cast<int>(before);
    const auto head = before ? old_engine.generateStatic({prompts[i]}, o, g0)[0] : Generation{};
    std::vector<std::int32_t> context = prompts[i];
    context.insert(context.end(), g.tokens.begin(), g.tokens.begin() + static_cast<std::ptrdiff_t>(before));
    o.max_new_tokens = limitOf(i) - static_cast<int>(before);
    const auto tail = o.max_new_tokens > 0 ? new_engine.generateStatic({context}, o, g0)[0] : Generation{};
    std::vector<std::int32_t> ids = head.tokens;
    ids.insert(ids.end(), tail.tokens.begin(), tail.tokens.end());
    std::vector<float> lps = head.logprobs;
    lps.insert(lps.end(), tail.logprobs.begin(), tail.logprobs.end());
    EXPECT_EQ(g.tokens, ids) << "sequence " << i;
    ASSERT_EQ(g.logprobs.size(), lps.size());
    for (std::size_t k = 0; k < lps.size(); ++k) worst = std::max(worst, double(std::abs(g.logprobs[k] - lps[k])));
  }
  EXPECT_GT(spanning, 0u) << "some sequence made tokens under both versions";
  EXPECT_LT(worst, 1e-5);

  // Sampled: every token's behaviour log-prob is its own version's.
  copyWeights(model, old_weights);
  SequenceScheduler t(model, 0, {3, 0, kBlock});
  t.weightsChanged(0);
  std::map<SequenceId, std::size_t> trow;
  for (std::size_t i = 0; i < 6; ++i) {
    SequenceRequest r;
    r.prompt = prompts[i];
    r.options.temperature = 0.8;
    r.options.max_new_tokens = 16;
    r.seed = 300 + i;
    trow[t.submit(std::move(r))] = i;
  }
  std::vector<Generation> sampled(6);
  for (int k = 0; k < 5; ++k) {
    for (auto& f : t.step()) sampled[trow.at(f.id)] = std::move(f.generation);
  }
  copyWeights(model, new_weights);
  t.weightsChanged(1);
  while (!t.idle()) {
    for (auto& f : t.step()) sampled[trow.at(f.id)] = std::move(f.generation);
  }
  worst = 0;
  std::size_t both = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    const Generation& g = sampled[i];
    const auto under_old = scored(old_weights, prompts[i], g, 0.8), under_new = scored(new_weights, prompts[i], g, 0.8);
    bool saw_old = false, saw_new = false;
    for (std::size_t k = 0; k < g.tokens.size(); ++k) {
      const float want = g.token_versions[k] == 0 ? under_old[k] : under_new[k];
      (g.token_versions[k] == 0 ? saw_old : saw_new) = true;
      worst = std::max(worst, double(std::abs(g.logprobs[k] - want)));
    }
    both += saw_old && saw_new;
  }
  EXPECT_GT(both, 0u);
  EXPECT_LT(worst, 1e-5);
}

// A multi-turn episode's next turn appends to its own blocks: a sequence that kept its K/V is
// continued by one whose prompt extends its context (its tokens, then an environment reply),
// which prefills only what was added and generates what a fresh prefill of the whole context
// gives. Two of the first turns share a prompt (their contexts keep its blocks shared). A prompt
// that does not extend the kept context starts over.
TEST(SequenceScheduler, AContinuedTurnPrefillsOnlyWhatWasAddedAndEqualsAFreshPrefill) {
  torch::manual_seed(28);
  PolicyModel model(schedulerModel());
  auto prompts = spreadPrompts(5);
  prompts.push_back(prompts[2]);
  SequenceScheduler s(model, 0, {4, 0, kBlock});
  const auto first = submitAll(
      s, prompts, [](std::size_t) { return 7; }, true);
  std::vector<std::pair<SequenceId, Generation>> turn1(prompts.size());
  while (!s.idle()) {
    for (auto& f : s.step()) turn1[first.at(f.id)] = {f.id, std::move(f.generation)};
  }
  EXPECT_GT(s.kvBytesInUse(), 0) << "the first turns' K/V is kept";
  // Second turns: context + reply; the last one's prompt is not its context's extension.
  std::vector<std::vector<std::int32_t>> second;
  std::map<SequenceId, std::size_t> row;
  std::uint64_t added = 0, reused = 0;
  const auto before = s.counters();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::int32_t> p = prompts[i];
    p.insert(p.end(), turn1[i].second.tokens.begin(), turn1[i].second.tokens.end());
    const std::vector<std::int32_t> reply{static_cast<std::int32_t>(40 + i), 41, 42};
    const bool broken = i + 1 == prompts.size();
    if (broken) p[0] = 3;  // not the kept context
    if (!broken) {
      reused += p.size() - 1;  // every position but the last sampled token's
      added += reply.size() + 1;
    } else {
      added += p.size() + reply.size();
    }
    p.insert(p.end(), reply.begin(), reply.end());
    second.push_back(p);
    SequenceRequest r;
    r.prompt = p;
    r.options.greedy = true;
    r.options.max_new_tokens = 6;
    r.continues = turn1[i].first;
    row[s.submit(std::move(r))] = i;
  }
  std::vector<Generation> got(prompts.size());
  while (!s.idle()) {
    for (auto& f : s.step()) got[row.at(f.id)] = std::move(f.generation);
  }
  const auto& c = s.counters();
  EXPECT_EQ(c.reused_context_tokens - before.reused_context_tokens, reused);
  EXPECT_EQ(c.prefill_tokens - before.prefill_tokens, added);
  EXPECT_EQ(c.kept_dropped - before.kept_dropped, 1u);
  EXPECT_EQ(s.kvBytesInUse(), 0) << "nothing kept: the second turns did not ask to keep";
  SequenceScheduler fresh(model, 0, {4, 0, kBlock});
  const auto frow = submitAll(fresh, second, [](std::size_t) { return 6; });
  std::vector<Generation> want(second.size());
  while (!fresh.idle()) {
    for (auto& f : fresh.step()) want[frow.at(f.id)] = std::move(f.generation);
  }
  double worst = 0;
  for (std::size_t i = 0; i < second.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "second turn " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (std::size_t k = 0; k < want[i].logprobs.size(); ++k)
      worst = std::max(worst, double(std::abs(got[i].logprobs[k] - want[i].logprobs[k])));
  }
  EXPECT_LT(worst, 1e-5);
  // Given back: a kept context nobody continues.
  SequenceRequest r;
  r.prompt = {1, 2, 3};
  r.options.max_new_tokens = 2;
  r.keep_kv = true;
  const SequenceId id = s.submit(r);
  while (!s.idle()) s.step();
  EXPECT_GT(s.kvBytesInUse(), 0);
  s.release(id);
  EXPECT_EQ(s.kvBytesInUse(), 0);
}
