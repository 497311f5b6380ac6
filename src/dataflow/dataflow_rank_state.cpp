// The dataflow rank's bookkeeping: restore from a checkpoint, progress lines, checkpoints and
// the plug-in inventory (counters, state).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <limits>

#include "astraflow/core/run_files.hpp"
#include "dataflow/dataflow_rank.hpp"

namespace astraflow::dataflow_detail {

using namespace std::chrono_literals;

void DataflowRank::restore() {
  const auto snap = readDataflowCheckpoint(w_.run_dir, w_.resume_version);
  admission_->restore({snap.next_problem, snap.next_task_id, snap.next_group_id});
  eval_.restoreStart(snap.eval_accuracy_start);
  best_ = {snap.eval_best_version, snap.eval_best_mean, {}};
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
               snap.next_problem);
}

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
  if (const EvalRound* round = eval_.latestDone())
    eval = fmt::format("{:.3f} (v{})", round->accuracy(), round->result.version_high);
  spdlog::info(
      "{} v{:<4} reward {:.3f} | eval {} | trainer wait {:.0f}% | {:.1f} traj/s | produced {} consumed {} "
      "buffered {} stale {} filtered {}",
      p.name, p.published, p.reward_count ? p.reward_sum / static_cast<double>(p.reward_count) : 0.0, eval,
      wait + busy > 0 ? 100.0 * wait / (wait + busy) : 0.0, static_cast<double>(c.produced) / elapsed, c.produced,
      c.consumed, p.assembler->buffered(), c.stale_dropped, c.filtered);
  p.reward_sum = 0;
  p.reward_count = 0;
  const double now = w_.now();
  for (const auto& count : pluginCounters()) {
    // Counter "dropped" of "filter.0.zero_advantage@solver" → event kind "dropped:zero_advantage"
    if (count.counter == "errors" || count.counter == "kept" || count.counter == "admitted") continue;
    std::string plugin = count.name.substr(count.name.rfind('.') + 1);
    plugin = plugin.substr(0, plugin.find('@'));
    w_.counterEvent(count.counter, plugin, now, p.published, count.value);
  }
}

void DataflowRank::dropConfirmed(PolicyState& p) {
  // Trained into a published version, and not needed by a checkpoint still to come.
  const std::int64_t keep_from = checkpoint_due_ >= 0 ? checkpoint_due_ : p.published;
  while (!p.unconfirmed.empty()) {
    const auto id = static_cast<std::int64_t>(p.unconfirmed.front().batch_id);
    if (id >= p.published || id >= keep_from) break;
    p.unconfirmed.pop_front();
  }
}

void DataflowRank::checkpointWhenAllReached() {
  const std::int64_t every = cfg_.run.checkpoint_every;
  if (every <= 0 || checkpoint_due_ < 0 || policies_.empty()) return;
  std::int64_t reached = policies_.front().published;
  for (const auto& p : policies_) reached = std::min(reached, p.published);
  if (reached < checkpoint_due_) return;
  const std::int64_t version = reached / every * every;  // the newest multiple all have reached
  checkpoint(version);
  checkpoint_due_ = version + every;
  for (auto& p : policies_) dropConfirmed(p);
}

void DataflowRank::checkpoint(std::int64_t version) {
  const double t = w_.now();
  DataflowSnapshot snap;
  snap.version = version;
  const Admission::Cursor cursor = admission_->cursor();
  snap.next_problem = cursor.next_problem;
  snap.next_task_id = cursor.next_task_id;
  snap.next_group_id = cursor.next_group_id;
  snap.eval_rounds = static_cast<std::int64_t>(eval_.rounds());
  snap.eval_accuracy_start = eval_.startAccuracy();
  snap.eval_best_version = best_.version;
  snap.eval_best_mean = best_.mean;
  snap.wall_seconds = w_.now();
  snap.config_text = cfg_.text;
  std::vector<std::string> names;
  for (const auto& p : policies_) {
    names.push_back(p.name);
    AssemblerCounters c = p.assembler->counters();
    // Batches served but not yet trained on at `version` go back to the buffer: a resumed run
    // serves them again.
    // With several policies the faster ones' batches past `version` were kept for this (they
    // are trained again from the checkpoint's weights on resume).
    for (const auto& b : p.unconfirmed) {
      if (static_cast<std::int64_t>(b.batch_id) < version) continue;
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
  snap.run_id = w_.run_id;
  // A checkpoint its filesystem cannot hold is skipped, not attempted: an HDF5 write that fails
  // part-way aborts the rank (docs/runtime-notes.md). The bound: the held trajectories (token,
  // log-prob and mask per token, their records) and the main file's attributes and counters.
  std::uint64_t need = std::uint64_t{4} << 20;
  for (const auto& h : snap.held) need += h.tokens.size() * 16 + 8192;
  if (const CheckpointRoom room = checkpointRoom(w_.run_dir, need); !room.fits) {
    ++checkpoints_skipped_;
    spdlog::warn("checkpoint v{} skipped: {}; the run goes on", version, room.why);
    last_checkpoint_ = version;
    return;
  }
  const auto bytes = writeDataflowCheckpoint(w_.run_dir, snap, names);
  w_.event(TraceKind::Checkpoint, t, version, bytes, snap.held.size());
  spdlog::info("checkpoint v{}: {} ({} trajectories buffered)", version, checkpointPath(w_.run_dir, version).string(),
               snap.held.size());
  last_checkpoint_ = version;
  pruneCheckpoints();
}

// run.keep_checkpoints, as each checkpoint is written (the trainers' files of this one may come
// later: it counts once complete); the runtime prunes once more after the last.
void DataflowRank::pruneCheckpoints() {
  if (cfg_.run.keep_checkpoints <= 0) return;
  std::vector<std::string> names;
  for (const auto& p : policies_) names.push_back(p.name);
  std::vector<std::int64_t> protect;
  std::int64_t protect_from = std::numeric_limits<std::int64_t>::max();
  if (cfg_.run.keep_best) {
    if (best_.version >= 0) protect.push_back(best_.version);
    protect_from = eval_.oldestUnfinished();
  }
  const auto removed = astraflow::pruneCheckpoints(w_.run_dir, names, cfg_.run.keep_checkpoints, protect, protect_from);
  checkpoints_pruned_ += removed.size();
  for (const auto v : removed) spdlog::info("run.keep_checkpoints: checkpoint v{} removed", v);
}

std::vector<std::pair<std::string, Plugin*>> DataflowRank::plugins() {
  std::vector<std::pair<std::string, Plugin*>> out;
  const auto& curators = admission_->curators();
  for (std::size_t i = 0; i < curators.size(); ++i) {
    out.emplace_back(fmt::format("curator.{}.{}", i, curators[i]->name()), curators[i].get());
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
std::vector<PluginCount> DataflowRank::pluginCounters() {
  std::vector<PluginCount> out;
  for (const auto& [key, plugin] : plugins()) {
    const auto& c = plugin->counters();
    auto add = [&](const char* counter, std::uint64_t value) { out.push_back({key, counter, value}); };
    if (key.rfind("curator.", 0) == 0) {
      add("admitted", c.admitted);
      add("skipped", c.skipped);
    } else if (key.rfind("filter.", 0) == 0) {
      add("kept", c.kept);
      add("dropped", c.dropped);
    } else if (key.rfind("sampler.", 0) == 0) {
      add("replayed", c.replayed);
    }
    add("errors", c.errors);
  }
  return out;
}

// cross_site.wait_for_sites gateways before the first task (bounded by wait_seconds), so that a
// short home run does not end before its remote sites joined.
void DataflowRank::waitForSites() {
  const int wanted = cfg_.cross_site.wait_for_sites;
  if (wanted <= 0) return;
  Backoff backoff(2000us);
  const double until = w_.segmentSeconds() + cfg_.cross_site.wait_seconds;
  while (hub_->openSites() < static_cast<std::size_t>(wanted)) {
    if (w_.segmentSeconds() > until) {
      spdlog::warn("cross-site: {} of {} site(s) joined within {:.0f} s (cross_site.wait_seconds); starting anyway",
                   hub_->openSites(), wanted, cfg_.cross_site.wait_seconds);
      return;
    }
    backoff.after(progressAndPublish() | ingest());
  }
}

}  // namespace astraflow::dataflow_detail
