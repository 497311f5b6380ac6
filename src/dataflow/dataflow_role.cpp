// The dataflow rank's loop (ARCHITECTURE §4): the coordination plane of a run. Every
// iteration it drives MPI progress for the windows it hosts, publishes staged weights, ingests
// trajectories, serves batches, admits tasks under the staleness budget and reports progress.
// It never waits on one peer: every step is a try, and an idle iteration backs off.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/dataflow/batch_assembler.hpp"
#include "astraflow/dataflow/dataflow_checkpoint.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/rollout/environment.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;

// One evaluation round: greedy episodes on the first eval.problems held-out problems.
struct EvalRound {
  std::int64_t min_version = 0;
  std::size_t expected = 0;
  std::size_t received = 0;
  double correct = 0;
  std::int64_t version_low = std::numeric_limits<std::int64_t>::max();
  std::int64_t version_high = -1;
  double t_start = 0;
  bool done() const { return received == expected; }
  double accuracy() const { return expected ? correct / static_cast<double>(expected) : 0.0; }
};

struct PolicyState {
  std::string name;
  int group = 0;  // index in trainerGroups()
  std::unique_ptr<BatchAssembler> assembler;
  std::vector<int> pools;  // pools serving the policy
  std::size_t next_pool = 0;
  std::int64_t published = -1;  // newest published version
  std::int64_t next_batch = 0;  // batch i is built for trainer version i
  std::int64_t target = 0;      // last version of the run (run.versions, or where a wall-time stop fell)
  std::deque<Batch> unconfirmed;  // served, not yet trained (id >= published)
  std::optional<std::vector<std::byte>> pending_batch;  // encoded, waiting for ring space
  std::int64_t in_flight = 0;   // training tasks admitted, trajectories not yet received
  std::deque<Task> outbox;      // admitted tasks waiting for task-ring space
  // Progress between two progress lines.
  double reward_sum = 0;
  std::uint64_t reward_count = 0;
  std::vector<double> served_at, published_at;  // per version (dataflow-side wait estimate)
};

class DataflowRank {
 public:
  explicit DataflowRank(RunWiring& w);
  RankReport run();

 private:
  bool progressAndPublish();
  bool ingest();
  void route(Trajectory t);
  bool serve();
  bool admit();
  bool flushOutbox();
  void startEval(std::int64_t min_version);
  bool finished(PolicyState& p) const;
  void endStreams();
  void drainUntilRolloutEnds();
  void checkpoint(std::int64_t version);
  void restore();
  void progressLine(PolicyState& p);
  double evalStart() const;
  // Every plug-in instance with a stable key ("filter.0.zero_advantage@solver", …).
  std::vector<std::pair<std::string, Plugin*>> plugins();
  std::vector<std::pair<std::string, double>> pluginCounters();
  Task makeTask(const std::string& policy, std::uint64_t problem, std::uint64_t group, std::uint32_t index);
  std::uint64_t nextProblem();
  bool nextAdmittedProblem(std::int64_t version, std::uint64_t& problem);
  PromptInfo promptInfo(std::uint64_t problem, std::int64_t version);

  RunWiring& w_;
  const Config& cfg_;
  std::unique_ptr<Environment> env_;
  std::vector<PolicyState> policies_;
  std::unique_ptr<io::TrajectoryWriter> trajectories_;
  std::map<std::uint64_t, std::size_t> eval_tasks_;  // task id → round
  std::vector<EvalRound> eval_rounds_;
  std::uint64_t next_problem_ = 0, next_task_id_ = 0, next_group_id_ = 0;
  std::uint64_t malformed_ = 0, unroutable_ = 0, rollout_ended_ = 0;
  std::uint64_t eval_received_ = 0;
  bool stop_admitting_ = false;
  double eval_start_ = -1;
  std::int64_t last_checkpoint_ = -1;
  std::vector<std::byte> record_;
  std::vector<std::unique_ptr<Curator>> curators_;
  std::unique_ptr<Router> router_;
  std::vector<std::string> policy_names_;
  std::vector<std::uint64_t> prompt_order_;  // this epoch's order of the prompt pool
  std::uint64_t prompt_epoch_ = ~std::uint64_t{0};
  std::mt19937_64 curator_rng_;
};

DataflowRank::DataflowRank(RunWiring& w)
    : w_(w), cfg_(w.cfg), env_(makeEnvironment(w.cfg.environment)), curator_rng_(w.cfg.run.seed * 31 + 7) {
  for (const auto& spec : cfg_.dataflow.curators) curators_.push_back(makeCurator(spec));
  router_ = makeRouter(cfg_.dataflow.router);
  const auto& groups = w.map.trainerGroups();
  for (const auto& g : groups) policy_names_.push_back(g.policy);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    PolicyState p;
    p.name = groups[g].policy;
    p.group = static_cast<int>(g);
    p.target = w.cfg.run.versions;
    std::vector<std::unique_ptr<Filter>> filters;
    for (const auto& spec : cfg_.dataflow.filters) filters.push_back(makeFilter(spec));
    p.assembler = std::make_unique<BatchAssembler>(p.name, cfg_.rollout.group_size, cfg_.trainer.groups_per_step,
                                                   cfg_.run.mode == "sync" ? 0 : cfg_.dataflow.max_staleness,
                                                   std::move(filters), makeSampler(cfg_.dataflow.sampler),
                                                   cfg_.run.seed * 1009 + g);
    p.assembler->setGroupObserver([this](std::uint64_t problem, const std::vector<double>& rewards) {
      if (curators_.empty()) return;
      const PromptInfo prompt = promptInfo(problem, 0);
      for (auto& c : curators_) {
        try {
          c->observe(prompt, rewards);
        } catch (const std::exception& e) {
          if (c->counters().errors++ < 3) spdlog::warn("curator {}: observe failed: {}", c->name(), e.what());
        }
      }
    });
    for (std::size_t i = 0; i < w.map.pools().size(); ++i) {
      const auto& served = w.map.pools()[i].policies;
      if (std::find(served.begin(), served.end(), p.name) != served.end()) p.pools.push_back(static_cast<int>(i));
    }
    policies_.push_back(std::move(p));
  }
  const auto path = (w.run_dir / "trajectories.h5").string();
  trajectories_ = w.resume ? std::make_unique<io::TrajectoryWriter>(io::TrajectoryWriter::openForAppend(path))
                           : std::make_unique<io::TrajectoryWriter>(path);
  if (w.resume) restore();
}

void DataflowRank::restore() {
  const auto snap = readDataflowCheckpoint(w_.run_dir, w_.resume_version);
  next_problem_ = snap.next_problem;
  next_task_id_ = snap.next_task_id;
  next_group_id_ = snap.next_group_id;
  eval_start_ = snap.eval_accuracy_start;
  for (auto& p : policies_) {
    AssemblerCounters c;
    for (const auto& [name, counters] : snap.counters) {
      if (name == p.name) c = counters;
    }
    std::vector<Trajectory> held;
    for (const auto& t : snap.held) {
      if (t.policy == p.name) held.push_back(t);
    }
    p.assembler->restore(c, std::move(held));
    p.next_batch = snap.version;
  }
  for (const auto& [key, plugin] : plugins()) {
    for (const auto& saved : snap.plugins) {
      if (saved.key != key) continue;
      plugin->loadState(saved.state);
      plugin->counters() = saved.counters;
    }
  }
  spdlog::info("resumed at version {}: {} trajectories buffered, prompt cursor {}", snap.version, snap.held.size(),
               next_problem_);
}

Task DataflowRank::makeTask(const std::string& policy, std::uint64_t problem, std::uint64_t group,
                            std::uint32_t index) {
  Task t;
  t.task_id = next_task_id_++;
  t.problem_id = problem;
  t.group_id = group;
  t.group_index = index;
  t.policy = policy;
  t.kind = cfg_.environment.name;
  return t;
}

// The prompt source: endless new training problems, or (dataflow.prompt_pool = N) epochs over
// the first N training problems, each epoch in its own shuffled order. A function of the cursor
// alone, so a resumed run continues the same sequence.
std::uint64_t DataflowRank::nextProblem() {
  const std::uint64_t k = next_problem_++;
  const std::uint64_t n = cfg_.dataflow.prompt_pool;
  if (n == 0) return env_->trainingId(k);
  const std::uint64_t epoch = k / n;
  if (epoch != prompt_epoch_) {
    prompt_order_.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) prompt_order_[i] = i;
    std::mt19937_64 shuffle_rng(cfg_.run.seed * 7919 + epoch);
    std::shuffle(prompt_order_.begin(), prompt_order_.end(), shuffle_rng);
    prompt_epoch_ = epoch;
  }
  return env_->trainingId(prompt_order_[k % n]);
}

PromptInfo DataflowRank::promptInfo(std::uint64_t problem, std::int64_t version) {
  env_->reset(problem);  // deterministic and cheap for the built-in environments
  return PromptInfo{problem, version, env_->metadata()};
}

// The next prompt every curator admits. Gives up after a bounded number of skips (admission
// tries again on a later iteration) so a curator that skips everything cannot stall the loop.
bool DataflowRank::nextAdmittedProblem(std::int64_t version, std::uint64_t& problem) {
  for (int attempt = 0; attempt < 4096; ++attempt) {
    problem = nextProblem();
    if (curators_.empty()) return true;
    const PromptInfo prompt = promptInfo(problem, version);
    bool admitted = true;
    for (auto& c : curators_) {
      try {
        admitted = c->admit(prompt, curator_rng_);
      } catch (const std::exception& e) {
        if (c->counters().errors++ < 3) spdlog::warn("curator {}: admit failed (prompt admitted): {}", c->name(), e.what());
        admitted = true;
      }
      if (!admitted) break;
    }
    if (admitted) return true;
  }
  return false;
}

bool DataflowRank::progressAndPublish() {
  bool did = false;
  for (auto& ring : w_.task_rings) {
    if (ring) ring->progress();
  }
  for (auto& p : policies_) {
    auto& store = *w_.weight_stores[p.group];
    store.progress();
    const double t = w_.now();
    const std::int64_t v = store.publishStaged();
    if (v < 0) continue;
    did = true;
    p.published = v;
    w_.event("publish", t, v, 0, 0);
    while (!p.unconfirmed.empty() && static_cast<std::int64_t>(p.unconfirmed.front().batch_id) < v) {
      p.unconfirmed.pop_front();
    }
    if (p.published_at.size() <= static_cast<std::size_t>(v)) p.published_at.resize(v + 1, -1);
    p.published_at[v] = w_.now();
    const bool resumed_start = w_.resume && v == w_.resume_version;
    if (!resumed_start && v > 0) {
      if (v % cfg_.run.progress_every == 0 || v == cfg_.run.versions) progressLine(p);
      if (cfg_.eval.problems > 0 && cfg_.eval.every > 0 && v % cfg_.eval.every == 0 && v < cfg_.run.versions) {
        startEval(v);
      }
      if (cfg_.run.checkpoint_every > 0 && v % cfg_.run.checkpoint_every == 0) checkpoint(v);
    }
  }
  return did;
}

bool DataflowRank::ingest() {
  bool did = false;
  for (std::size_t pool = 0; pool < w_.trajectory_rings.size(); ++pool) {
    auto& ring = w_.trajectory_rings[pool];
    if (!ring) continue;
    for (int i = 0; i < 256 && ring->tryPop(record_); ++i) {
      did = true;
      auto decoded = decodeTrajectory(record_);
      if (!decoded) {
        if (malformed_++ < 5) spdlog::warn("pool {}: malformed trajectory record refused: {}", pool, decoded.error());
        continue;
      }
      route(std::move(decoded).value());
    }
  }
  return did;
}

void DataflowRank::route(Trajectory t) {
  if (t.task_id == kEndOfStreamBatchId && t.tokens.empty()) {
    ++rollout_ended_;
    return;
  }
  if (auto it = eval_tasks_.find(t.task_id); it != eval_tasks_.end()) {
    auto& round = eval_rounds_[it->second];
    eval_tasks_.erase(it);
    ++eval_received_;
    ++round.received;
    round.correct += (!t.rewards.empty() && std::isfinite(t.rewards[0])) ? t.rewards[0] : 0.0;
    round.version_low = std::min(round.version_low, t.weight_version_min);
    round.version_high = std::max(round.version_high, t.weight_version_max);
    if (round.done()) {
      w_.event("eval", round.t_start, round.version_high, 0, round.expected);
      spdlog::info("eval: held-out greedy accuracy {:.3f} on {} problems (weights v{}{})", round.accuracy(),
                   round.expected, round.version_low,
                   round.version_low == round.version_high ? "" : fmt::format("..v{}", round.version_high));
    }
    return;
  }
  trajectories_->append(t);
  int target = -1;
  try {
    target = router_->route(t, policy_names_);
  } catch (const std::exception& e) {
    if (router_->counters().errors++ < 3) spdlog::warn("router {}: {}", router_->name(), e.what());
  }
  if (target < 0 || target >= static_cast<int>(policies_.size())) {
    // Unroutable: counted, and still kept by the policy that asked for it, so nothing is lost.
    if (unroutable_++ < 5) spdlog::warn("router {}: no trainer for the trajectory of task {} (policy '{}')",
                                        router_->name(), t.task_id, t.policy);
    target = -1;
    for (std::size_t i = 0; i < policies_.size(); ++i) {
      if (policies_[i].name == t.policy) target = static_cast<int>(i);
    }
    if (target < 0) return;
  }
  for (auto& p : policies_) {
    if (p.name == t.policy) --p.in_flight;  // in flight for the policy that admitted it
  }
  policies_[target].assembler->ingest(std::move(t));
}

bool DataflowRank::serve() {
  bool did = false;
  for (auto& p : policies_) {
    auto& ring = *w_.batch_rings[p.group];
    if (p.pending_batch) {
      if (!ring.tryPush(*p.pending_batch)) continue;
      p.pending_batch.reset();
      did = true;
    }
    // One batch ahead of the trainer at most: batch i is served once version i−1 is out.
    while (p.next_batch < p.target && p.next_batch <= p.published + 1) {
      const double t = w_.now();
      auto batch = p.assembler->serve(p.next_batch, static_cast<std::uint64_t>(p.next_batch));
      if (!batch) break;
      std::map<std::int64_t, std::uint64_t> staleness;
      for (const auto& traj : batch->trajectories) {
        staleness[batch->trainer_version - traj.weight_version_min]++;
        p.reward_sum += traj.rewards[0];
        ++p.reward_count;
      }
      auto bytes = encode(*batch);
      if (bytes.size() > ring.maxRecordBytes()) {
        throw Error(fmt::format("a batch of policy '{}' takes {} bytes but dataflow.batch_ring holds at most {}; "
                                "raise dataflow.batch_ring.slots or slot_bytes",
                                p.name, bytes.size(), ring.maxRecordBytes()));
      }
      w_.event("serve_batch", t, batch->trainer_version, bytes.size(), batch->trajectories.size());
      for (const auto& [s, n] : staleness) w_.event("batch_staleness", t, s, 0, n);
      if (p.served_at.size() <= static_cast<std::size_t>(p.next_batch)) p.served_at.resize(p.next_batch + 1, -1);
      p.served_at[p.next_batch] = w_.now();
      p.unconfirmed.push_back(std::move(*batch));
      ++p.next_batch;
      did = true;
      if (!ring.tryPush(bytes)) {
        p.pending_batch = std::move(bytes);
        break;
      }
    }
  }
  return did;
}

bool DataflowRank::admit() {
  if (stop_admitting_) return false;
  bool did = false;
  const int group_size = cfg_.rollout.group_size;
  for (auto& p : policies_) {
    if (p.published < 0) continue;  // no weights yet: nothing could be generated
    std::int64_t groups = 0;
    std::map<std::string, std::string> meta;
    if (cfg_.run.mode == "sync") {
      // Colocated-synchronous baseline: one batch of rollouts with the current weights, only
      // while the trainer is idle, then nothing until its next version is out.
      const bool idle = p.published == p.next_batch && p.in_flight == 0 && !p.pending_batch;
      if (idle && p.next_batch < p.target) {
        groups = cfg_.trainer.groups_per_step - static_cast<std::int64_t>(p.assembler->readyGroups());
        meta[kTaskMinVersionKey] = std::to_string(p.published);
      }
    } else {
      const std::int64_t room = p.assembler->admissionRoom(std::max<std::int64_t>(p.published, 0), p.in_flight);
      groups = room / group_size;
      // Enough for the remaining versions only.
      const std::int64_t needed = (p.target - p.next_batch) * p.assembler->batchTrajectories() -
                                  p.in_flight - static_cast<std::int64_t>(p.assembler->buffered());
      groups = std::min(groups, std::max<std::int64_t>(needed, 0) / group_size + (needed > 0 ? 1 : 0));
    }
    // Keep the outbox short: admission happens as task-ring space frees up, not all at once.
    groups = std::min<std::int64_t>(groups, std::max<std::int64_t>(0, 2 * cfg_.trainer.groups_per_step -
                                                                           static_cast<std::int64_t>(p.outbox.size()) /
                                                                               group_size));
    for (std::int64_t g = 0; g < groups; ++g) {
      std::uint64_t problem = 0;
      if (!nextAdmittedProblem(std::max<std::int64_t>(p.published, 0), problem)) break;
      const std::uint64_t group = next_group_id_++;
      for (int i = 0; i < group_size; ++i) {
        Task t = makeTask(p.name, problem, group, static_cast<std::uint32_t>(i));
        t.metadata = meta;
        p.outbox.push_back(std::move(t));
      }
      p.in_flight += group_size;
      did = true;
    }
  }
  return did;
}

void DataflowRank::startEval(std::int64_t min_version) {
  EvalRound round;
  round.min_version = min_version;
  round.expected = static_cast<std::size_t>(cfg_.eval.problems);
  round.t_start = w_.now();
  const std::size_t index = eval_rounds_.size();
  eval_rounds_.push_back(round);
  for (auto& p : policies_) {
    // Evaluation goes ahead of queued training tasks.
    for (int k = cfg_.eval.problems - 1; k >= 0; --k) {
      Task t = makeTask(p.name, env_->heldOutId(static_cast<std::uint64_t>(k)), 0, 0);
      t.metadata[kTaskEvalKey] = std::to_string(index);
      t.metadata[kTaskMinVersionKey] = std::to_string(min_version);
      eval_tasks_[t.task_id] = index;
      p.outbox.push_front(std::move(t));
    }
    break;  // the team's first policy answers the held-out problems
  }
}

bool DataflowRank::flushOutbox() {
  bool did = false;
  for (auto& p : policies_) {
    while (!p.outbox.empty()) {
      bool pushed = false;
      const auto bytes = encode(p.outbox.front());
      for (std::size_t k = 0; k < p.pools.size() && !pushed; ++k) {
        const int pool = p.pools[(p.next_pool + k) % p.pools.size()];
        pushed = w_.task_rings[pool]->tryPush(bytes);
      }
      if (!pushed) break;
      p.next_pool = (p.next_pool + 1) % p.pools.size();
      p.outbox.pop_front();
      did = true;
    }
  }
  return did;
}

bool DataflowRank::finished(PolicyState& p) const { return p.next_batch >= p.target && p.published >= p.target; }

void DataflowRank::progressLine(PolicyState& p) {
  double wait = 0, busy = 0;
  const std::int64_t last = p.published;
  const std::int64_t first = std::max<std::int64_t>(last - cfg_.run.progress_every, w_.resume ? w_.resume_version : 0);
  for (std::int64_t i = first; i < last; ++i) {
    if (i + 1 >= static_cast<std::int64_t>(p.published_at.size()) || i >= static_cast<std::int64_t>(p.served_at.size()))
      continue;
    if (p.published_at[i] < 0 || p.served_at[i] < 0 || p.published_at[i + 1] < 0) continue;
    const double ready = std::max(p.published_at[i], p.served_at[i]);
    wait += ready - p.published_at[i];
    busy += p.published_at[i + 1] - ready;
  }
  const auto& c = p.assembler->counters();
  const double elapsed = std::max(1e-9, w_.segmentSeconds());
  std::string eval = "n/a";
  for (auto it = eval_rounds_.rbegin(); it != eval_rounds_.rend(); ++it) {
    if (it->done()) {
      eval = fmt::format("{:.3f} (v{})", it->accuracy(), it->version_high);
      break;
    }
  }
  spdlog::info("{} v{:<4} reward {:.3f} | eval {} | trainer wait {:.0f}% | {:.1f} traj/s | produced {} consumed {} "
               "buffered {} stale {} filtered {}",
               p.name, p.published, p.reward_count ? p.reward_sum / static_cast<double>(p.reward_count) : 0.0, eval,
               wait + busy > 0 ? 100.0 * wait / (wait + busy) : 0.0, static_cast<double>(c.produced) / elapsed,
               c.produced, c.consumed, p.assembler->buffered(), c.stale_dropped, c.filtered);
  p.reward_sum = 0;
  p.reward_count = 0;
  const double now = w_.now();
  for (const auto& [key, value] : pluginCounters()) {
    // "plugin.filter.0.zero_advantage@solver.dropped" → kind "dropped:zero_advantage"
    const auto last_dot = key.rfind('.');
    const std::string counter = key.substr(last_dot + 1);
    if (counter == "errors" || counter == "kept" || counter == "admitted") continue;
    std::string plugin = key.substr(0, last_dot);
    plugin = plugin.substr(plugin.rfind('.') + 1);
    plugin = plugin.substr(0, plugin.find('@'));
    w_.event((counter + ":" + plugin).c_str(), now, p.published, 0, static_cast<std::uint64_t>(value));
  }
}

void DataflowRank::checkpoint(std::int64_t version) {
  const double t = w_.now();
  DataflowSnapshot snap;
  snap.version = version;
  snap.next_problem = next_problem_;
  snap.next_task_id = next_task_id_;
  snap.next_group_id = next_group_id_;
  snap.eval_rounds = static_cast<std::int64_t>(eval_rounds_.size());
  snap.eval_accuracy_start = evalStart();
  snap.wall_seconds = w_.now();
  snap.config_text = cfg_.text;
  std::vector<std::string> names;
  for (const auto& p : policies_) {
    names.push_back(p.name);
    AssemblerCounters c = p.assembler->counters();
    // Batches served but not yet trained on at `version` go back to the buffer: a resumed run
    // serves them again.
    for (const auto& b : p.unconfirmed) {
      c.consumed -= b.trajectories.size();
      --c.batches;
      snap.held.insert(snap.held.end(), b.trajectories.begin(), b.trajectories.end());
    }
    const auto held = p.assembler->heldTrajectories();
    snap.held.insert(snap.held.end(), held.begin(), held.end());
    snap.counters.emplace_back(p.name, c);
  }
  for (const auto& [key, plugin] : plugins()) {
    snap.plugins.push_back({key, plugin->saveState(), plugin->counters()});
  }
  const auto bytes = writeDataflowCheckpoint(w_.run_dir, snap, names);
  w_.event("checkpoint", t, version, bytes, snap.held.size());
  spdlog::info("checkpoint v{}: {} ({} trajectories buffered)", version, checkpointPath(w_.run_dir, version).string(),
               snap.held.size());
  last_checkpoint_ = version;
}

std::vector<std::pair<std::string, Plugin*>> DataflowRank::plugins() {
  std::vector<std::pair<std::string, Plugin*>> out;
  for (std::size_t i = 0; i < curators_.size(); ++i) {
    out.emplace_back(fmt::format("curator.{}.{}", i, curators_[i]->name()), curators_[i].get());
  }
  for (auto& p : policies_) {
    const auto& filters = p.assembler->filters();
    for (std::size_t i = 0; i < filters.size(); ++i) {
      out.emplace_back(fmt::format("filter.{}.{}@{}", i, filters[i]->name(), p.name), filters[i].get());
    }
    out.emplace_back(fmt::format("sampler.{}@{}", p.assembler->sampler().name(), p.name), &p.assembler->sampler());
  }
  out.emplace_back(fmt::format("router.{}", router_->name()), router_.get());
  return out;
}

// Per plug-in counters for the summary: "plugin.<key>.<counter>", only the counters that apply.
std::vector<std::pair<std::string, double>> DataflowRank::pluginCounters() {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [key, plugin] : plugins()) {
    const auto& c = plugin->counters();
    const std::string base = "plugin." + key + ".";
    if (key.rfind("curator.", 0) == 0) {
      out.emplace_back(base + "admitted", static_cast<double>(c.admitted));
      out.emplace_back(base + "skipped", static_cast<double>(c.skipped));
    } else if (key.rfind("filter.", 0) == 0) {
      out.emplace_back(base + "kept", static_cast<double>(c.kept));
      out.emplace_back(base + "dropped", static_cast<double>(c.dropped));
    } else if (key.rfind("sampler.", 0) == 0) {
      out.emplace_back(base + "replayed", static_cast<double>(c.replayed));
    }
    out.emplace_back(base + "errors", static_cast<double>(c.errors));
  }
  return out;
}

double DataflowRank::evalStart() const {
  if (eval_start_ >= 0) return eval_start_;
  return !eval_rounds_.empty() && eval_rounds_.front().done() ? eval_rounds_.front().accuracy() : -1.0;
}

void DataflowRank::endStreams() {
  for (auto& p : policies_) {
    Batch end;
    end.batch_id = kEndOfStreamBatchId;
    end.policy = p.name;
    w_.batch_rings[p.group]->push(encode(end));
  }
  Task end;
  end.kind = kEndOfStreamKind;
  const auto bytes = encode(end);
  for (std::size_t pool = 0; pool < w_.map.pools().size(); ++pool) {
    for (std::size_t r = 0; r < w_.map.pools()[pool].world_ranks.size(); ++r) {
      // Pushing may wait for space: keep ingesting meanwhile, rollout ranks may be blocked on us.
      Backoff backoff;
      while (!w_.task_rings[pool]->tryPush(bytes)) {
        progressAndPublish();
        ingest();
        backoff.wait();
      }
    }
  }
}

RankReport DataflowRank::run() {
  Backoff backoff(1000us);
  if (cfg_.eval.problems > 0 && !w_.resume) startEval(0);
  std::size_t rollout_ranks = 0;
  for (const auto& pool : w_.map.pools()) rollout_ranks += pool.world_ranks.size();

  // Phase 1: the run proper.
  bool wall_stop = false;
  while (true) {
    bool did = progressAndPublish();
    did |= ingest();
    did |= serve();
    did |= admit();
    did |= flushOutbox();
    if (std::all_of(policies_.begin(), policies_.end(), [&](PolicyState& p) { return finished(p); })) break;
    if (!wall_stop && cfg_.run.max_wall_seconds > 0 && w_.segmentSeconds() > cfg_.run.max_wall_seconds) {
      wall_stop = true;
      for (auto& p : policies_) p.target = std::min(p.target, p.next_batch);
      spdlog::info("run.max_wall_seconds ({:.0f} s) reached: finishing the batches already served", cfg_.run.max_wall_seconds);
    }
    if (did) {
      backoff.reset();
    } else {
      backoff.wait();
    }
  }
  stop_admitting_ = true;
  // Training tasks not yet handed out are dropped (reported); evaluation tasks stay queued.
  std::uint64_t unsent = 0;
  for (auto& p : policies_) {
    std::deque<Task> keep;
    for (auto& t : p.outbox) {
      if (eval_tasks_.count(t.task_id)) {
        keep.push_back(std::move(t));
      } else {
        ++unsent;
        --p.in_flight;
      }
    }
    p.outbox = std::move(keep);
  }
  // Phase 2: the final evaluation, at the final weights.
  std::int64_t final_version = policies_.empty() ? 0 : policies_.front().published;
  if (cfg_.eval.problems > 0) startEval(final_version);
  while (!eval_tasks_.empty()) {
    bool did = progressAndPublish();
    did |= ingest();
    did |= flushOutbox();
    if (did) {
      backoff.reset();
    } else {
      backoff.wait();
    }
  }
  // Phase 3: end every stream and take what rollout ranks still send.
  endStreams();
  while (rollout_ended_ < rollout_ranks) {
    if (progressAndPublish() | ingest()) {
      backoff.reset();
    } else {
      backoff.wait();
    }
  }
  trajectories_->flush();
  if (last_checkpoint_ != final_version) checkpoint(final_version);

  RankReport r;
  AssemblerCounters total;
  std::uint64_t buffered = 0;
  for (const auto& p : policies_) {
    const auto& c = p.assembler->counters();
    total.produced += c.produced;
    total.filtered += c.filtered;
    total.filtered_nonfinite += c.filtered_nonfinite;
    total.filtered_error += c.filtered_error;
    total.stale_dropped += c.stale_dropped;
    total.consumed += c.consumed;
    total.replayed += c.replayed;
    total.batches += c.batches;
    buffered += p.assembler->buffered();
  }
  r["versions"] = static_cast<double>(final_version);
  r["produced"] = static_cast<double>(total.produced);
  r["accepted"] = static_cast<double>(total.accepted());
  r["filtered"] = static_cast<double>(total.filtered);
  r["filtered_nonfinite"] = static_cast<double>(total.filtered_nonfinite);
  r["filtered_error"] = static_cast<double>(total.filtered_error);
  r["stale_dropped"] = static_cast<double>(total.stale_dropped);
  r["consumed"] = static_cast<double>(total.consumed);
  r["batches"] = static_cast<double>(total.batches);
  r["buffered"] = static_cast<double>(buffered);
  r["malformed"] = static_cast<double>(malformed_);
  r["unroutable"] = static_cast<double>(unroutable_);
  r["tasks_unsent"] = static_cast<double>(unsent);
  r["eval_received"] = static_cast<double>(eval_received_);
  r["eval_rounds"] = static_cast<double>(eval_rounds_.size());
  r["eval_accuracy_start"] = evalStart();
  r["eval_accuracy_end"] = !eval_rounds_.empty() && eval_rounds_.back().done() ? eval_rounds_.back().accuracy() : -1.0;
  r["wall_seconds"] = w_.now();
  r["segment_wall_seconds"] = w_.segmentSeconds();
  r["trajectories_written"] = static_cast<double>(trajectories_->rowsWritten());
  r["replayed"] = static_cast<double>(total.replayed);
  for (const auto& [key, value] : pluginCounters()) r[key] = value;
  return r;
}

}  // namespace

RankReport runDataflowRole(RunWiring& w) { return DataflowRank(w).run(); }

}  // namespace astraflow
