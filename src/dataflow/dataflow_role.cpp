// The dataflow rank's loop (docs/architecture.md §4): the coordination plane of a run. Every
// iteration it drives MPI progress for the windows it hosts, publishes staged weights, ingests
// trajectories, serves batches, admits tasks under the staleness budget and reports progress.
// It never waits on one peer: every step is a try, and an idle iteration backs off.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dataflow/dataflow_rank.hpp"

namespace astraflow {

namespace dataflow_detail {

using namespace std::chrono_literals;

DataflowRank::DataflowRank(RunWiring& w)
    : w_(w),
      cfg_(w.cfg),
      ctx_(w.context()),
      env_(makeEnvironment(w.cfg.environment)),
      eval_(ctx_, w.cfg.eval, w.cfg.workflow.multiAgent() ? w.cfg.workflow.roles.size() : 1, evalPlans(),
            w.cfg.workflow.multiAgent() ? w.cfg.workflow.roles.front().name : std::string()) {
  router_ = makeRouter(cfg_.dataflow.router);
  const auto& groups = w.map.trainerGroups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    policy_names_.push_back(groups[g].policy);
    policies_.push_back(makePolicyState(groups[g].policy, static_cast<int>(g)));
  }
  if (cfg_.workflow.multiAgent()) routeTeamThroughLead();
  std::vector<AdmissionUnit> units;
  if (cfg_.workflow.multiAgent()) {
    AdmissionUnit team{lead_, {}};
    for (std::size_t i = 0; i < policies_.size(); ++i) team.members.push_back(i);
    units.push_back(std::move(team));
  } else {
    for (std::size_t i = 0; i < policies_.size(); ++i) units.push_back({i, {i}});
  }
  admission_ = std::make_unique<Admission>(cfg_, *env_, policies_, std::move(units));
  server_pools_ = std::make_unique<ServerPools>(cfg_, w.map);
  for (std::size_t i = 0; i < w.map.pools().size(); ++i) {
    if (server_pools_->served(i))
      pool_sinks_.push_back(server_pools_->sink(i, *w_.task_rings.at(i)));
    else
      pool_sinks_.push_back(std::make_unique<RingSink>(*w_.task_rings.at(i)));
  }
  if (cfg_.elastic.mode != ElasticMode::Off) elastic_ = std::make_unique<ElasticPools>(w_);
  if (!cfg_.cross_site.listen.empty()) {
    std::vector<WeightStore*> stores;
    for (const auto& p : policies_) stores.push_back(w_.weight_stores[p.group].get());
    hub_ = std::make_unique<SiteHub>(cfg_, std::move(stores), policy_names_);
  }
  balance_ = std::make_unique<BalanceWindow>(w_, policies_, eval_, hub_.get(), elastic_.get());
  const auto path = (w.run_dir / "trajectories.h5").string();
  trajectories_ = w.resume ? std::make_unique<io::TrajectoryWriter>(io::TrajectoryWriter::openForAppend(path))
                           : std::make_unique<io::TrajectoryWriter>(path);
  trajectories_->setFlushSeconds(cfg_.run.flush_seconds);
  if (!w.resume && !w.run_id.empty()) trajectories_->tagRun(w.run_id);
  if (w.resume) restore();
  setUpEvaluation();
  if (const std::int64_t every = cfg_.run.checkpoint_every; every > 0)
    checkpoint_due_ = ((w.resume ? w.resume_version : 0) / every + 1) * every;
}

// One policy's state: its batch assembler (filters, sampler, staleness bound, seeded per group)
// observed by the balance window and admission, and the pools that serve it.
PolicyState DataflowRank::makePolicyState(const std::string& name, int group) {
  PolicyState p;
  p.name = name;
  p.group = group;
  p.target = cfg_.run.versions;
  std::vector<std::unique_ptr<Filter>> filters;
  for (const auto& spec : cfg_.dataflow.filters) filters.push_back(makeFilter(spec));
  p.assembler = std::make_unique<BatchAssembler>(p.name, cfg_.rollout.group_size, cfg_.trainer.groups_per_step,
                                                 cfg_.run.mode == RunMode::Sync ? 0 : cfg_.dataflow.max_staleness,
                                                 std::move(filters), makeSampler(cfg_.dataflow.sampler),
                                                 cfg_.run.seed * 1009 + static_cast<std::uint64_t>(group));
  p.assembler->setEntryObserver([this](const Trajectory& t, bool entered) {
    if (entered) balance_->entered(t);
  });
  p.assembler->setGroupObserver([this](std::uint64_t problem, const std::vector<double>& rewards) {
    admission_->observeGroup(problem, rewards);
  });
  for (std::size_t i = 0; i < w_.map.pools().size(); ++i) {
    const auto& served = w_.map.pools()[i].policies;
    if (std::find(served.begin(), served.end(), p.name) != served.end()) p.pools.push_back(static_cast<int>(i));
  }
  return p;
}

// Team tasks go to the pools that serve every policy of the team, through the outbox of the
// policy of the first role.
void DataflowRank::routeTeamThroughLead() {
  const auto team = cfg_.workflow.policies();
  for (std::size_t i = 0; i < policies_.size(); ++i) {
    if (policies_[i].name == cfg_.workflow.roles.front().policy) lead_ = i;
  }
  auto& lead = policies_[lead_];
  lead.pools.clear();
  for (std::size_t i = 0; i < w_.map.pools().size(); ++i) {
    const auto& served = w_.map.pools()[i].policies;
    if (std::all_of(team.begin(), team.end(),
                    [&](const std::string& p) { return std::find(served.begin(), served.end(), p) != served.end(); })) {
      lead.pools.push_back(static_cast<int>(i));
    }
  }
}

bool DataflowRank::progressAndPublish() {
  bool did = false;
  for (auto& ring : w_.task_rings) {
    if (ring) ring->progress();
  }
  // An evaluation round is answered at one weight version: a policy's next version waits while
  // a round runs (its trainer stalls at most one staged version), unless no rollout is left to
  // answer it. A policy's first version is never held: rollout ranks start from it.
  const bool hold = eval_.pending() && !no_rollout_;
  for (auto& p : policies_) {
    auto& store = *w_.weight_stores[p.group];
    store.progress();
    if (hold && p.published >= 0) continue;
    const double t = w_.now();
    // The staged version's checksum and delta are made on the store's worker; the call that
    // publishes it copies it under the seqlock (the "publish" event spans that call).
    const std::int64_t v = store.advancePublish();
    if (v < 0) continue;
    did = true;
    p.published = v;
    if (hub_) hub_->published(static_cast<std::size_t>(p.group), v);
    if (elastic_) elastic_->published(static_cast<std::size_t>(p.group), v, store.publishedBytes());
    w_.event(TraceKind::Publish, t, v, store.publishedBytes().size(), 0, {.policy = p.group});
    if (store.options().delta && store.lastDelta().target_version == v) {
      // The delta this version was encoded as: bytes shipped per reader, and changed bf16 words.
      w_.event(TraceKind::Delta, t, v, store.lastDelta().bytes, store.lastDelta().changed, {.policy = p.group});
    }
    dropConfirmed(p);
    if (p.published_at.size() <= static_cast<std::size_t>(v)) p.published_at.resize(v + 1, -1);
    p.published_at[v] = w_.now();
    if (p.trainer_clock.size() <= static_cast<std::size_t>(v)) p.trainer_clock.resize(v + 1, TrainerClock{-1, -1});
    p.trainer_clock[v] = store.lastTrainerClock();
    const bool resumed_start = w_.resume && v == w_.resume_version;
    if (!resumed_start && v > 0) {
      if (v % cfg_.run.progress_every == 0 || v == cfg_.run.versions) progressLine(p);
      // Evaluations and checkpoints follow the first (lead) policy's versions.
      const bool lead = &p == &policies_[lead_];
      if (lead && eval_.enabled() && cfg_.eval.every > 0 && v % cfg_.eval.every == 0 && v < cfg_.run.versions) {
        startEval(v);
      }
      if (lead) balance_->recordBooks(v);
      if (lead && cfg_.elastic.every > 0 && v % cfg_.elastic.every == 0) balance_->report(p, v);
    }
  }
  if (did) checkpointWhenAllReached();
  return did;
}

bool DataflowRank::ingest() {
  bool did = false;
  if (elastic_) {
    // A lost spawned pool's leased tasks go back to the front of their outbox.
    did |= elastic_->progress([this](Task t) { requeueFront(std::move(t)); });
    elastic_->reap();
  }
  if (hub_) {
    // Remote sites' trajectories take the same path as a local pool's ring records; the tasks a
    // lost site held go back to the front of their outbox.
    did |= hub_->progress([this](std::span<const std::byte> record,
                                 std::uint32_t pool_uid) { ingestRecord(record, "remote site", pool_uid); },
                          [this](Task t) { requeueFront(std::move(t)); });
  }
  for (std::size_t pool = 0; pool < w_.trajectory_rings.size(); ++pool) {
    auto& ring = w_.trajectory_rings[pool];
    if (!ring) continue;
    const bool local = pool < w_.map.pools().size();
    for (int i = 0; i < 256 && ring->tryPop(record_); ++i) {
      did = true;
      if (local && server_pools_->served(pool))
        ingestServerRecord(record_, pool);
      else
        ingestRecord(record_, local ? w_.map.pools()[pool].name.c_str() : "spawned pool");
    }
  }
  return did;
}

std::optional<Trajectory> DataflowRank::decodeRecord(std::span<const std::byte> record, std::string_view source) {
  auto decoded = decodeTrajectory(record);
  if (decoded) return std::move(decoded).value();
  // Counted in the report; the first few are shown.
  if (malformed_++ < 5) spdlog::warn("{}: malformed trajectory record refused: {}", source, decoded.error());
  return std::nullopt;
}

void DataflowRank::ingestRecord(std::span<const std::byte> record, const char* source, std::uint32_t pool_uid) {
  auto decoded = decodeRecord(record, source);
  if (!decoded) return;
  Trajectory t = std::move(*decoded);
  if (pool_uid >= kSitePoolUidBase) t.pool_uid = pool_uid;  // a remote site's: its pool index means nothing here
  route(std::move(t));
}

void DataflowRank::ingestServerRecord(std::span<const std::byte> record, std::size_t pool) {
  auto decoded = decodeRecord(record, w_.map.pools()[pool].name);
  if (!decoded) return;
  Trajectory t = std::move(*decoded);
  std::vector<Task> back;
  switch (server_pools_->arrived(pool, t, back)) {
    case ServerPools::Verdict::Route: route(std::move(t)); return;
    case ServerPools::Verdict::Duplicate: return;
    case ServerPools::Verdict::Requeue: requeue(std::move(back)); return;
    case ServerPools::Verdict::Ended: ++rollout_ended_; return;
    case ServerPools::Verdict::PoolLost:
      ++rollout_ended_;
      requeue(std::move(back));
      for (auto& p : policies_) {
        p.pools.erase(std::remove(p.pools.begin(), p.pools.end(), static_cast<int>(pool)), p.pools.end());
        if (p.pools.empty() && !elastic_ && !hub_ && !no_rollout_) {
          no_rollout_ = true;
          spdlog::error("policy '{}' has no rollout pool left: the run ends with the batches already served", p.name);
        }
      }
      return;
  }
}

void DataflowRank::requeue(std::vector<Task> tasks) {
  // In reverse, so the first given back is the first to go out again.
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) requeueFront(std::move(*it));
}

void DataflowRank::requeueFront(Task t) {
  for (auto& p : policies_) {
    if (p.name == t.policy) {
      p.outbox.push_front(std::move(t));
      return;
    }
  }
}

void DataflowRank::route(Trajectory t) {
  if (elastic_) {
    std::optional<Task> back;
    if (!elastic_->returned(t, back)) {  // a late duplicate of a re-issued task (counted), or given back
      if (back) requeueFront(std::move(*back));
      return;
    }
  }
  if (isEndOfStream(t)) {
    ++rollout_ended_;
    return;
  }
  if (hub_) hub_->returned(t.task_id);
  if (eval_.take(t)) return;  // an evaluation task's answer
  trajectories_->append(t);
  balance_->produced(t);
  int target = -1;
  try {
    target = router_->route(t, policy_names_);
  } catch (const std::exception& e) {
    if (router_->counters().errors++ < 3) spdlog::warn("router {}: {}", router_->name(), e.what());
  }
  if (target < 0 || target >= static_cast<int>(policies_.size())) {
    // Unroutable: counted, and still kept by the policy that asked for it, so nothing is lost.
    if (unroutable_++ < 5)
      spdlog::warn("router {}: no trainer for the trajectory of task {} (policy '{}')", router_->name(), t.task_id,
                   t.policy);
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
        throw Error(
            fmt::format("a batch of policy '{}' takes {} bytes but dataflow.batch_ring holds at most {}; "
                        "raise dataflow.batch_ring.slots or slot_bytes",
                        p.name, bytes.size(), ring.maxRecordBytes()));
      }
      w_.event(TraceKind::ServeBatch, t, batch->trainer_version, bytes.size(), batch->trajectories.size(),
               {.policy = p.group});
      for (const auto& [s, n] : staleness) {
        w_.event(TraceKind::BatchStaleness, t, batch->trainer_version, 0, n,
                 {.policy = p.group, .staleness = static_cast<std::int32_t>(s)});
      }
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

void DataflowRank::startEval(std::int64_t min_version) {
  // The first policy answers the held-out problems (of a team: the team does, through the
  // first role's policy, each role at the version its policy has published by now).
  auto& p = policies_[lead_];
  auto tasks = eval_.start(min_version, [&](std::size_t set, std::uint64_t k) {
    Task t = admission_->makeTask(p.name, env_->heldOutSetId(set, k), 0, 0);
    if (cfg_.workflow.multiAgent()) {
      for (const auto& q : policies_) {
        if (&q != &p) {
          t.metadata[std::string(kTaskMinVersionKey) + "." + q.name] =
              std::to_string(std::max<std::int64_t>(q.published, 0));
        }
      }
    }
    return t;
  });
  for (auto& t : tasks) p.outbox.push_front(std::move(t));  // evaluation goes ahead of queued training tasks
}

bool DataflowRank::flushOutbox() {
  bool did = false;
  for (auto& p : policies_) {
    if (p.outbox.empty()) continue;
    // The policy's local pools, the spawned pools and the remote sites, each weighted by the
    // rollout ranks behind it (TaskDealer).
    std::vector<TaskSink*> sinks;
    std::vector<TaskDealer::Place> places;
    auto add = [&](TaskSink* sink, std::uint64_t ranks) {
      sinks.push_back(sink);
      places.push_back({sink, ranks});
    };
    for (int pool : p.pools) {
      add(pool_sinks_.at(static_cast<std::size_t>(pool)).get(),
          server_pools_->liveRanks(static_cast<std::size_t>(pool)));
    }
    if (elastic_) {
      for (const auto& [sink, ranks] : elastic_->activeSinks()) add(sink, static_cast<std::uint64_t>(ranks));
    }
    if (hub_) {
      std::uint64_t ranks = 0;
      for (const auto& site : hub_->activeSites()) ranks += site.ranks;
      add(hub_.get(), ranks);
    }
    if (sinks.empty()) continue;  // every pool of the policy is lost (no_rollout_)
    p.dealer.setPlaces(places);
    while (!p.outbox.empty()) {
      bool pushed = false;
      const auto bytes = encode(p.outbox.front());
      for (const std::size_t k : p.dealer.order()) {
        if (sinks[k]->tryPush(p.outbox.front(), bytes)) {
          p.dealer.took(k);
          pushed = true;
          break;
        }
      }
      if (!pushed) break;
      p.outbox.pop_front();
      did = true;
    }
  }
  return did;
}

bool DataflowRank::finished(PolicyState& p) const { return p.next_batch >= p.target && p.published >= p.target; }

void DataflowRank::endStreams() {
  for (auto& p : policies_) {
    w_.batch_rings[p.group]->push(encode(endOfStreamBatch(p.name)));
  }
  if (hub_) hub_->endStreams();  // each gateway ends its own pool's streams
  const auto bytes = encode(endOfStreamTask());
  auto pushEnd = [&](std::size_t ring) {
    // Pushing may wait for space: keep ingesting meanwhile, rollout ranks may be blocked on us.
    Backoff backoff;
    while (w_.task_rings[ring] && !w_.task_rings[ring]->tryPush(bytes)) {
      progressAndPublish();
      ingest();
      backoff.wait();
    }
  };
  // One end-of-stream task per rank still reading its ring (a rank whose server was lost has left).
  for (std::size_t pool = 0; pool < w_.map.pools().size(); ++pool) {
    for (std::size_t r = 0; r < server_pools_->liveRanks(pool); ++r) pushEnd(pool);
  }
  if (elastic_) elastic_->endStreams([&](int ring) { pushEnd(static_cast<std::size_t>(ring)); });
}

DataflowReport DataflowRank::run() {
  Backoff backoff(1000us);
  if (eval_.enabled() && !w_.resume) startEval(0);
  balance_->start();  // a resumed run's first window starts from its restored books
  std::size_t rollout_ranks = 0;
  for (const auto& pool : w_.map.pools()) rollout_ranks += pool.world_ranks.size();
  if (hub_) waitForSites();

  // Phase 1: the run proper.
  bool wall_stop = false;
  while (true) {
    bool did = progressAndPublish();
    did |= ingest();
    did |= serve();
    did |= admission_->admit();
    did |= flushOutbox();
    if (std::all_of(policies_.begin(), policies_.end(), [&](PolicyState& p) { return finished(p); })) break;
    if (!wall_stop && no_rollout_) {
      wall_stop = true;
      for (auto& p : policies_) p.target = std::min(p.target, p.next_batch);
    }
    if (!wall_stop && cfg_.run.max_wall_seconds > 0 && w_.segmentSeconds() > cfg_.run.max_wall_seconds) {
      wall_stop = true;
      for (auto& p : policies_) p.target = std::min(p.target, p.next_batch);
      spdlog::info("run.max_wall_seconds ({:.0f} s) reached: finishing the batches already served",
                   cfg_.run.max_wall_seconds);
    }
    if (w_.reports && w_.reports->due())
      w_.reports->write(report(policies_.empty() ? 0 : policies_[lead_].published, 0));
    backoff.after(did);
  }
  // Training tasks not yet handed out are dropped (reported); evaluation tasks stay queued.
  const std::uint64_t unsent = admission_->stop([this](const Task& t) { return eval_.owns(t.task_id); });
  // Phase 2: the final evaluation, at the final weights.
  std::int64_t final_version = policies_.empty() ? 0 : policies_[lead_].published;
  if (eval_.enabled() && !no_rollout_) startEval(final_version);
  while (eval_.pending() && !no_rollout_) {  // a round no pool is left to answer is abandoned
    bool did = progressAndPublish();
    did |= ingest();
    did |= flushOutbox();
    backoff.after(did);
  }
  // Phase 3: end every stream and take what rollout ranks still send.
  endStreams();
  // Local rollout ranks and those of every remote site that joined (a lost site's ranks count
  // as ended: they will send nothing more).
  auto expected = [&] {
    return rollout_ranks + (hub_ ? hub_->rolloutRanks() : 0) + (elastic_ ? elastic_->ranksEver() : 0);
  };
  auto ended = [&] { return rollout_ended_ + (hub_ ? hub_->lostRanks() : 0) + (elastic_ ? elastic_->ranksDone() : 0); };
  while (ended() < expected()) {
    if (elastic_) elastic_->reap();
    backoff.after(progressAndPublish() | ingest());
  }
  if (elastic_) elastic_->reap();  // the pools whose last ranks ended in the last turn
  trajectories_->flush();
  if (last_checkpoint_ != final_version) checkpoint(final_version);

  return report(final_version, unsent);
}

}  // namespace dataflow_detail

DataflowReport runDataflowRole(RunWiring& w) { return dataflow_detail::DataflowRank(w).run(); }

}  // namespace astraflow
