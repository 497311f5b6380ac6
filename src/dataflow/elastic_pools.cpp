// ElasticPools: rollout pools the dataflow rank spawns (MPI_Comm_spawn) and retires at run time, with their task
// leases and mirror weight stores; and runSpawnedPool, the `astraflow spawned-pool` side of such a pool.
#include "dataflow/elastic_pools.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <span>

#include <fmt/ranges.h>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/log.hpp"
#include "astraflow/io/trace_writer.hpp"
#include "dataflow/pool_view.hpp"

namespace astraflow::dataflow_detail {

namespace {

// Collective over comm: each rank's pid and host name, gathered at rank 0 (the dataflow rank).
void gatherIdentity(const Comm& comm, std::vector<int>& pids, std::vector<std::string>& hosts) {
  const int size = comm.size(), rank = comm.rank();
  struct {
    int pid;
    char host[64];
  } mine{static_cast<int>(getpid()), {}};
  gethostname(mine.host, sizeof mine.host - 1);
  const auto all = comm.gatherBytes(0, std::as_bytes(std::span(&mine, 1)));
  for (int r = 1; r < static_cast<int>(all.size()) && rank == 0 && r < size; ++r) {
    decltype(mine) theirs{};
    std::memcpy(&theirs, all[r].data(), std::min(all[r].size(), sizeof theirs));
    theirs.host[sizeof theirs.host - 1] = '\0';
    pids.push_back(theirs.pid);
    hosts.emplace_back(theirs.host);
  }
}

std::string selfExecutable() {
  char path[PATH_MAX] = {0};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error("cannot resolve /proc/self/exe to spawn rollout ranks");
  return std::string(path, static_cast<std::size_t>(n));
}

}  // namespace

ElasticPools::ElasticPools(RunWiring& home) : home_(home) {}

ElasticPools::~ElasticPools() {
  // Retired pools were released collectively with their ranks (disconnect()); a lost one gave
  // its handles up in lose(). Any other pool still here is not released either: freeing or
  // disconnecting is collective, and its ranks are not waiting for it.
  for (auto& p : pools_) {
    if (p->state == SpawnedPool::State::Gone) continue;
    if (p->comms) p->comms->abandon();
    p->merged.abandon();
    p->inter.abandon();
  }
}

bool ElasticPools::spawn(int ranks) {
  if (ranks <= 0) return false;
  const int k = static_cast<int>(pools_.size());
  std::string error;
  Comm inter = Comm::spawn(selfExecutable(), {"spawned-pool"}, ranks, error);
  if (!inter.valid()) {
    ++spawn_failures_;
    spdlog::warn("elastic: spawning {} rollout rank(s) failed ({}); the pool keeps its size", ranks, error);
    return false;
  }
  auto p = std::make_unique<SpawnedPool>();
  p->index = k;
  p->name = fmt::format("spawn{}", k);
  p->ranks = ranks;
  p->merged = inter.merge(false);
  p->inter = std::move(inter);
  // What the new ranks need: the config, the run folder, their pool number and the run clock.
  p->merged.broadcastString(0, home_.cfg.text);
  p->merged.broadcastString(0, home_.run_dir.string());
  p->merged.broadcastValue(0, k);  // an int, then the clock, a double: what the spawned side reads
  p->merged.broadcastValue(0, home_.now());
  p->cfg = std::make_unique<Config>(poolView(home_.cfg, ranks, p->name));
  p->map = std::make_unique<RoleMap>(*p->cfg, ranks + 1);
  p->comms = std::make_unique<RoleComms>(RoleComms::split(*p->map, p->merged));
  p->wiring = std::make_unique<RunWiring>(*p->cfg, *p->map, *p->comms);
  p->wiring->run_dir = home_.run_dir;
  p->wiring->t0 = home_.t0;
  p->wiring->weight_version_bytes = home_.weight_version_bytes;  // this rank measures for the pool's stores
  wireWindows(*p->wiring);
  gatherIdentity(p->merged, p->pids, p->hosts);
  // Its rings join the home wiring's, so ingest and admission treat it like any pool.
  home_.task_rings.push_back(std::move(p->wiring->task_rings.at(0)));
  home_.trajectory_rings.push_back(std::move(p->wiring->trajectory_rings.at(0)));
  p->ring = static_cast<int>(home_.task_rings.size()) - 1;
  p->sink = std::make_unique<LeasedRingSink>(*home_.task_rings.back(), leases_, k);
  // The mirrors start at every policy's current version.
  for (std::size_t g = 0; g < home_.weight_stores.size(); ++g) {
    auto& store = *home_.weight_stores[g];
    if (store.publishedVersion() >= 0)
      p->wiring->weight_stores[g]->publish(store.publishedVersion(), store.publishedBytes());
  }
  p->last_heard = home_.now();
  spawned_ranks_ += static_cast<std::uint64_t>(ranks);
  spdlog::info("elastic: spawned pool {} with {} rollout rank(s) (pids {})", p->name, ranks, fmt::join(p->pids, ","));
  home_.event(TraceKind::Spawn, home_.now(), 0, 0, static_cast<std::uint64_t>(ranks));
  pools_.push_back(std::move(p));
  return true;
}

int ElasticPools::retire(int ranks, const std::set<std::string>& suspect_uids) {
  // Suspect pools first, then the newest.
  std::vector<SpawnedPool*> order;
  for (auto& p : pools_) {
    if (p->state == SpawnedPool::State::Active) order.push_back(p.get());
  }
  std::stable_sort(order.begin(), order.end(), [&](SpawnedPool* a, SpawnedPool* b) {
    const bool sa = suspect_uids.count(a->name) > 0, sb = suspect_uids.count(b->name) > 0;
    return sa != sb ? sa : a->index > b->index;
  });
  int retired = 0;
  for (auto* p : order) {
    if (retired >= ranks) break;
    p->state = SpawnedPool::State::Retiring;
    retired += p->ranks;
    // After the tasks already queued: each rank finishes what it holds first. Pushed by
    // progress() as ring space frees (a blocking push could wait on ranks that wait on us).
    p->ends_to_push = p->ranks;
    spdlog::info("elastic: retiring pool {} ({} rank(s)) after its queued tasks", p->name, p->ranks);
    home_.event(TraceKind::Retire, home_.now(), 0, 0, static_cast<std::uint64_t>(p->ranks));
  }
  return retired;
}

void ElasticPools::published(std::size_t group, std::int64_t version, std::span<const std::byte> bytes) {
  for (auto& p : pools_) {
    if (p->state == SpawnedPool::State::Active || p->state == SpawnedPool::State::Retiring) {
      p->wiring->weight_stores.at(group)->publish(version, bytes);
    }
  }
}

SpawnedPool* ElasticPools::poolOfLabel(std::int32_t label) {
  const int k = label / kSpawnRankLabel - 1;
  return k >= 0 && k < static_cast<int>(pools_.size()) ? pools_[static_cast<std::size_t>(k)].get() : nullptr;
}

bool ElasticPools::returned(const Trajectory& t, std::optional<Task>& given_back) {
  const bool end = isEndOfStream(t);
  auto* p = poolOfLabel(t.producer_rank);
  if (p) p->last_heard = home_.now();
  if (!end && t.status == static_cast<std::uint8_t>(TrajectoryStatus::Returned)) {
    // A spawned rank of a server-backed pool could not generate it. A team task comes back once
    // per role: the first record gives it back, the others find no lease.
    given_back = leases_.giveBack(t.task_id);
    if (given_back) ++given_back_;
    return false;
  }
  if (p) {
    if (end) {
      ++p->ended;
    } else {
      ++p->produced;
    }
  }
  return end || leases_.returned(t.task_id, t.role);  // false: a late duplicate of a re-issued task
}

void ElasticPools::lose(SpawnedPool& p, const std::string& why, const std::function<void(Task)>& reissue) {
  p.state = SpawnedPool::State::Lost;
  lost_ranks_ += static_cast<std::uint64_t>(p.ranks - p.ended);
  home_.peer_lost = true;
  auto tasks = leases_.lose(p.index);
  spdlog::warn("elastic: lost pool {} ({}); re-issuing its {} leased task(s)", p.name, why, tasks.size());
  for (auto& task : tasks) reissue(std::move(task));
  // The pool is given up whole: its other ranks would wait forever in collectives with the lost
  // one. Those on this node are ended here; elsewhere they get an end-of-stream and are left to
  // the launcher (mpirun --enable-recovery keeps the job alive).
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  const auto bytes = encode(endOfStreamTask());
  for (std::size_t r = 0; r < p.pids.size(); ++r) {
    if (p.hosts[r] == host) {
      kill(p.pids[r], SIGKILL);
    } else {
      home_.task_rings[static_cast<std::size_t>(p.ring)]->tryPush(bytes);
    }
  }
  // Its windows and communicators are never freed (collective with a dead member): the
  // handles are given up, leaked on purpose (every rank leaves with _exit after a loss).
  home_.task_rings[static_cast<std::size_t>(p.ring)].release();
  home_.trajectory_rings[static_cast<std::size_t>(p.ring)].release();
  for (auto& s : p.wiring->weight_stores) s.release();
  for (auto& s : p.wiring->node_weights) s.release();
  p.comms->abandon();
  p.merged.abandon();
  p.inter.abandon();
  home_.event(TraceKind::PoolLost, home_.now(), 0, 0, static_cast<std::uint64_t>(p.ranks));
}

bool ElasticPools::progress(const std::function<void(Task)>& reissue) {
  bool pushed_end = false;
  for (auto& p : pools_) {
    if (p->state != SpawnedPool::State::Retiring || p->ends_to_push == 0) continue;
    if (!end_record_.size()) {
      end_record_ = encode(endOfStreamTask());
    }
    auto& ring = *home_.task_rings[static_cast<std::size_t>(p->ring)];
    while (p->ends_to_push > 0 && ring.tryPush(end_record_)) {
      --p->ends_to_push;
      pushed_end = true;
    }
  }
  const double now = home_.now();
  if (now < next_liveness_check_) return pushed_end;
  next_liveness_check_ = now + 0.5;
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  bool did = pushed_end;
  for (auto& p : pools_) {
    if (p->state != SpawnedPool::State::Active && p->state != SpawnedPool::State::Retiring) continue;
    for (std::size_t r = 0; r < p->pids.size(); ++r) {
      // Processes on this node can be checked directly; elsewhere the lease decides.
      if (p->hosts[r] == host && kill(p->pids[r], 0) != 0 && errno == ESRCH) {
        lose(*p, fmt::format("process {} of rank {} is gone", p->pids[r], r + 1), reissue);
        did = true;
        break;
      }
    }
    if (p->state == SpawnedPool::State::Lost) continue;
    if (const std::size_t held = leases_.held(p->index);
        held > 0 && now - p->last_heard > home_.cfg.elastic.lease_seconds) {
      lose(*p, fmt::format("silent for {:.0f} s with {} task(s) leased", now - p->last_heard, held), reissue);
      did = true;
    }
  }
  return did;
}

void ElasticPools::endStreams(const std::function<void(int ring)>& push_end) {
  for (auto& p : pools_) {
    if (p->state != SpawnedPool::State::Active) continue;
    p->state = SpawnedPool::State::Retiring;  // ends with the run
    for (int r = 0; r < p->ranks; ++r) push_end(p->ring);
  }
}

void ElasticPools::disconnect(SpawnedPool& p) {
  // Collective with the pool's ranks, in the order they free theirs (runSpawnedPool).
  // Rank 0 (this one) sends nothing; each pool rank its encoded RankReport.
  auto gathered = p.merged.gatherBytes(0, {});
  for (std::size_t r = 1; r < gathered.size(); ++r) p.reports.push_back(decodeRankReport(gathered[r]));
  unreturned_ += leases_.held(p.index);  // tasks it held and never answered (none when it drained)
  for (auto& s : p.wiring->weight_stores) s.reset();
  home_.trajectory_rings[static_cast<std::size_t>(p.ring)].reset();
  home_.task_rings[static_cast<std::size_t>(p.ring)].reset();
  p.wiring.reset();
  p.comms.reset();
  p.merged.release();
  p.inter.release();
  p.state = SpawnedPool::State::Gone;
  retired_ranks_ += static_cast<std::uint64_t>(p.ranks);
  spdlog::info("elastic: pool {} retired and disconnected", p.name);
}

void ElasticPools::reap() {
  for (auto& p : pools_) {
    if (p->state == SpawnedPool::State::Retiring && p->ends_to_push == 0 && p->ended >= p->ranks) disconnect(*p);
  }
}

int ElasticPools::activeRanks() const {
  int n = 0;
  for (const auto& p : pools_) n += p->state == SpawnedPool::State::Active ? p->ranks : 0;
  return n;
}

std::vector<ElasticPools::PoolInfo> ElasticPools::activePools() const {
  std::vector<PoolInfo> out;
  for (const auto& p : pools_) {
    if (p->state == SpawnedPool::State::Active) out.push_back({p->name, p->ranks, kSpawnRankLabel * (p->index + 1)});
  }
  return out;
}

std::uint64_t ElasticPools::ranksEver() const { return spawned_ranks_; }

std::uint64_t ElasticPools::ranksDone() const { return lost_ranks_; }

std::vector<std::pair<TaskSink*, int>> ElasticPools::activeSinks() const {
  std::vector<std::pair<TaskSink*, int>> out;
  for (const auto& p : pools_) {
    if (p->state == SpawnedPool::State::Active) out.emplace_back(p->sink.get(), p->ranks);
  }
  return out;
}

std::string ElasticPools::uidOfRank(std::int32_t label) const {
  const int k = label / kSpawnRankLabel - 1;
  return k >= 0 && k < static_cast<int>(pools_.size()) ? pools_[static_cast<std::size_t>(k)]->name : std::string();
}

int ElasticPools::ranksOf(const std::string& uid) const {
  for (const auto& p : pools_) {
    if (p->name == uid) return p->ranks;
  }
  return 0;
}

std::vector<RankReport> ElasticPools::childReports() const {
  std::vector<RankReport> out;
  for (const auto& p : pools_) out.insert(out.end(), p->reports.begin(), p->reports.end());
  return out;
}

ElasticFigures ElasticPools::figures() const {
  ElasticFigures f;
  f.elastic_spawned_ranks = spawned_ranks_;
  f.elastic_spawn_failures = spawn_failures_;
  f.elastic_retired_ranks = retired_ranks_;
  f.elastic_lost_ranks = lost_ranks_;
  f.elastic_tasks_reissued = leases_.reissued();
  f.elastic_duplicates_dropped = leases_.duplicates();
  f.elastic_pools = pools_.size();
  f.elastic_unreturned_tasks = unreturned_;
  f.elastic_tasks_given_back = given_back_;
  return f;
}

}  // namespace astraflow::dataflow_detail

namespace astraflow {

int runSpawnedPool(int argc, char** argv, const RolloutLoop& rollout) {
  using namespace dataflow_detail;
  MpiEnvironment env(&argc, &argv);
  Comm parent = Comm::parent();
  if (!parent.valid()) {
    std::fprintf(stderr, "astraflow: spawned-pool is started by a run's dataflow rank (elastic.mode), not by hand\n");
    return 2;
  }
  Comm merged = parent.merge(true);
  const std::string text = merged.broadcastString(0, {}), dir = merged.broadcastString(0, {});
  const int k = merged.broadcastValue(0, 0);
  const double clock = merged.broadcastValue(0, 0.0);
  const int size = merged.size();
  try {
    const Config base = parseConfig(text, "spawned pool");
    const Config view = poolView(base, size - 1, fmt::format("spawn{}", k));
    const RoleMap map(view, size);
    RoleComms comms = RoleComms::split(map, merged);
    RunWiring w(view, map, comms);
    w.run_dir = dir;
    w.t0 = mpiSeconds() - clock;
    w.rank_label_offset = kSpawnRankLabel * (k + 1);
    initLogging(w.labelRank(), fmt::format("rollout:spawn{}", k), base.run.log_level);
    wireWindows(w);
    std::vector<int> pids;
    std::vector<std::string> hosts;
    gatherIdentity(merged, pids, hosts);
    RankReport report{w.labelRank(), fmt::format("rollout:spawn{}", k), RolloutReport{}};
    {
      io::TraceWriter trace((w.run_dir / "trace" / fmt::format("spawn{}_rank_{}.h5", k, w.rank())).string());
      trace.setFlushSeconds(base.run.flush_seconds);
      w.trace = &trace;
      w.event(TraceKind::Startup, w.now(), -1);  // the spawn's time on the run clock, not the run's start
      report.figures = rollout(w);
      w.trace = nullptr;
      trace.markCleanEnd();
    }
    merged.gatherBytes(0, encodeRankReport(report));
    for (auto& s : w.weight_stores) s.reset();
    w.trajectory_rings.clear();
    w.task_rings.clear();
  } catch (const std::exception& e) {
    // Alone in its own job: the dataflow rank sees it go (a lost pool) and re-issues its tasks.
    spdlog::error("spawned pool: {}", e.what());
    spdlog::shutdown();
    std::_Exit(1);
  }
  // In the order the dataflow rank releases its side (ElasticPools::disconnect).
  merged.release();
  parent.release();
  return 0;
}

}  // namespace astraflow
