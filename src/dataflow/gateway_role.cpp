// A remote site's gateway (docs/architecture.md §8, docs/cross-site.md): the hub of a job that has no
// trainers. It connects to the home dataflow rank over UCX, mirrors each policy's weights into
// its own weight store (pulling every published version once, as deltas when it can, and
// republishing it for its local rollout ranks, which read it exactly as they read the home
// store), feeds the home site's tasks into its pool's task ring under a credit window, and
// forwards its pool's trajectories home. Its rollout ranks run the unchanged RaaS loop.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/ucx.hpp"
#include "astraflow/dataflow/run_wiring.hpp"
#include "dataflow/site_protocol.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;
using namespace site;

struct MirroredPolicy {
  std::string name;
  WeightStore* store = nullptr;
  WeightReplica replica;
  std::int64_t home_published = -1;
  bool requested = false;
  bool force_full = false;
  std::uint64_t updates = 0, full_updates = 0, bytes = 0, rejected = 0;
};

class GatewayRank {
 public:
  explicit GatewayRank(RunWiring& w) : w_(w), cfg_(w.cfg) {
    const auto& groups = w.map.trainerGroups();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      MirroredPolicy p;
      p.name = groups[g].policy;
      p.store = w.weight_stores.at(g).get();
      policies_.push_back(std::move(p));
    }
    for (const auto& pool : w.map.pools()) local_ranks_ += pool.world_ranks.size();
  }

  GatewayReport run();

 private:
  void connect();
  void handle(const UcxMessage& m);
  void applyUpdate(const UcxMessage& m);
  bool requestWeights();
  bool feedTasks();
  bool grantCredit();
  bool forwardTrajectories();
  void endLocalStreams();
  bool mirrored() const;
  GatewayReport report() const;

  RunWiring& w_;
  const Config& cfg_;
  std::unique_ptr<UcpContext> context_;
  std::unique_ptr<UcpWorker> worker_;
  UcxConnection home_;
  std::vector<MirroredPolicy> policies_;
  std::deque<std::vector<std::byte>> tasks_;  // from home, waiting for task-ring space
  std::int64_t credit_out_ = 0;               // granted to home, not yet used
  std::size_t local_ranks_ = 0, local_ended_ = 0;
  bool home_ended_ = false, local_ended_sent_ = false, home_lost_ = false;
  std::string home_lost_reason_;
  std::vector<std::byte> record_;
  std::uint64_t tasks_received_ = 0, trajectories_forwarded_ = 0, malformed_ = 0, tasks_dropped_ = 0;
  std::uint64_t trajectories_undelivered_ = 0;
};

// Tries until cross_site.wait_seconds: the home job may start after this one. A refusal
// (token, protocol version, model mismatch) is final.
void GatewayRank::connect() {
  UcxLinkOptions options;
  options.token = resolveToken(cfg_.cross_site);
  options.protocol_version = kProtocolVersion;
  std::uint64_t largest = 0;
  for (const auto& p : policies_) largest = std::max(largest, p.store->capacity());
  options.max_message_bytes = largest + (1u << 20);
  context_ = std::make_unique<UcpContext>();
  worker_ = std::make_unique<UcpWorker>(*context_);
  const auto [host, port] = splitHostPort(cfg_.cross_site.connect);
  const double until = w_.now() + cfg_.cross_site.wait_seconds;
  Backoff backoff(500000us);
  while (true) {
    try {
      home_ = connectTo(*worker_, host, port, options, 10.0);
      break;
    } catch (const UcxHandshakeRefused&) {
      throw;
    } catch (const UcxError& e) {
      if (w_.now() > until) {
        throw Error(fmt::format("cross-site: cannot reach home at {} within {:.0f} s (cross_site.wait_seconds): {}",
                                cfg_.cross_site.connect, cfg_.cross_site.wait_seconds, e.what()));
      }
      backoff.wait();
    }
  }
  Hello hello{cfg_.cross_site.site, static_cast<std::uint32_t>(local_ranks_), {}};
  for (const auto& p : policies_) hello.policies.push_back({p.name, p.store->capacity()});
  home_.send(kHello, encode(hello));
  const UcxMessage answer = home_.recv(60.0);
  if (answer.kind == kRefuse) {
    throw Error(fmt::format("cross-site: home {} refused site '{}': {}", cfg_.cross_site.connect, cfg_.cross_site.site,
                            decodeRefuse(answer.payload).reason));
  }
  if (answer.kind != kWelcome) throw SiteProtocolError(fmt::format("expected welcome, got {}", kindName(answer.kind)));
  const Welcome welcome = decodeWelcome(answer.payload);
  if (welcome.published.size() != policies_.size()) {
    throw SiteProtocolError(
        fmt::format("welcome for {} policies, this site has {}", welcome.published.size(), policies_.size()));
  }
  for (std::size_t i = 0; i < policies_.size(); ++i) policies_[i].home_published = welcome.published[i];
  spdlog::info("cross-site: site '{}' joined home {} ({} rollout rank(s))", cfg_.cross_site.site,
               cfg_.cross_site.connect, local_ranks_);
}

void GatewayRank::applyUpdate(const UcxMessage& m) {
  const WeightUpdate u = decodeWeightUpdate(m.payload);
  if (u.policy >= policies_.size()) throw SiteProtocolError(fmt::format("weight update for policy #{}", u.policy));
  auto& p = policies_[u.policy];
  const bool full = u.full;
  const auto version = u.version;
  const auto& parts = u.parts;
  std::uint64_t bytes = 0;
  for (const auto& part : parts) bytes += part.size();
  p.requested = false;
  if (parts.empty()) return;  // already current
  const double t = w_.now();
  try {
    applyStoreUpdate(p.replica, full, version, u.hash, parts);
  } catch (const DeltaError& e) {
    // Corrupt, truncated or wrong-base: never applied; the next request asks for a full version.
    ++p.rejected;
    p.force_full = true;
    spdlog::warn("cross-site: weight update of '{}' to v{} rejected ({}); asking for the full version", p.name, version,
                 e.what());
    return;
  }
  p.force_full = false;
  ++p.updates;
  p.full_updates += full ? 1 : 0;
  p.bytes += bytes;
  p.store->publish(p.replica.version, p.replica.blob);
  w_.event(TraceKind::SiteWeights, t, p.replica.version, bytes, full ? 0 : parts.size());
}

void GatewayRank::handle(const UcxMessage& m) {
  switch (m.kind) {
    case kPublished: {
      const Published pub = decodePublished(m.payload);
      if (pub.policy >= policies_.size()) throw SiteProtocolError(fmt::format("published for policy #{}", pub.policy));
      policies_[pub.policy].home_published = std::max(policies_[pub.policy].home_published, pub.version);
      return;
    }
    case kWeightUpdate: applyUpdate(m); return;
    case kTasks: {
      const RecordList list = decodeRecordList(m.payload, m.kind);
      for (const auto record : list.records) tasks_.emplace_back(record.begin(), record.end());
      tasks_received_ += list.records.size();
      credit_out_ -= static_cast<std::int64_t>(list.records.size());
      return;
    }
    case kEnd: home_ended_ = true; return;
    default:
      throw SiteProtocolError(fmt::format("unexpected {} message (kind {}) from home", kindName(m.kind), m.kind));
  }
}

// Pull-based mirror: one outstanding request per policy, made as soon as home has published a
// version newer than the mirror's (each version is fetched once, for the whole local pool).
bool GatewayRank::requestWeights() {
  bool did = false;
  for (std::size_t i = 0; i < policies_.size(); ++i) {
    auto& p = policies_[i];
    if (p.requested || (p.home_published <= p.replica.version && !p.force_full) || p.home_published < 0) continue;
    home_.send(kWeightRequest,
               encode(WeightRequest{static_cast<std::uint32_t>(i), p.replica.version, p.replica.hash,
                                    static_cast<std::uint32_t>(p.replica.deltas_since_full), p.force_full}));
    p.requested = true;
    did = true;
  }
  return did;
}

bool GatewayRank::feedTasks() {
  // Tasks wait until every policy has a mirrored version: a rollout rank never runs a task on
  // weights this site has not received yet (end-of-stream tasks need none).
  if (!local_ended_sent_) {
    for (const auto& p : policies_) {
      if (p.replica.version < 0) return false;
    }
  }
  bool did = false;
  auto& ring = *w_.task_rings.front();
  while (!tasks_.empty() && ring.tryPush(tasks_.front())) {
    tasks_.pop_front();
    did = true;
  }
  return did;
}

// Credit keeps at most cross_site.tasks_in_flight tasks between home and the local ring; it is
// granted in steps of a quarter so that one message carries many.
bool GatewayRank::grantCredit() {
  if (home_ended_) return false;
  const std::int64_t room = cfg_.cross_site.tasks_in_flight - static_cast<std::int64_t>(tasks_.size()) - credit_out_;
  if (room < std::max<std::int64_t>(1, cfg_.cross_site.tasks_in_flight / 4)) return false;
  home_.send(kCredit, encode(Credit{static_cast<std::uint32_t>(room)}));
  credit_out_ += room;
  return true;
}

bool GatewayRank::forwardTrajectories() {
  std::uint32_t n = 0;
  std::vector<std::vector<std::byte>> records;
  auto& ring = *w_.trajectory_rings.front();
  while (n < 256 && ring.tryPop(record_)) {
    auto decoded = decodeTrajectory(record_);
    if (!decoded) {
      if (malformed_++ < 5)
        spdlog::warn("cross-site: malformed trajectory record from the local pool: {}", decoded.error());
      continue;
    }
    if (isEndOfStream(decoded.value())) ++local_ended_;
    records.push_back(record_);
    ++n;
  }
  if (n == 0) return false;
  if (home_lost_) {
    trajectories_undelivered_ += n;
    return true;
  }
  RecordList out;
  for (const auto& r : records) out.records.emplace_back(r.data(), r.size());
  home_.send(kTrajectories, encode(out));
  trajectories_forwarded_ += n;
  return true;
}

bool GatewayRank::mirrored() const {
  return std::all_of(policies_.begin(), policies_.end(), [](const MirroredPolicy& p) {
    return !p.requested && !p.force_full && p.replica.version >= p.home_published;
  });
}

void GatewayRank::endLocalStreams() {
  const auto bytes = encode(endOfStreamTask());
  tasks_dropped_ += tasks_.size();
  tasks_.clear();
  for (std::size_t r = 0; r < local_ranks_; ++r) tasks_.push_back(bytes);
  local_ended_sent_ = true;
}

GatewayReport GatewayRank::run() {
  if (w_.map.pools().size() != 1) {
    throw ConfigError(fmt::format("a gateway site's layout has {} rollout entries; allowed: exactly one (its pool)",
                                  w_.map.pools().size()));
  }
  connect();
  Backoff backoff(1000us);
  while (!(local_ended_sent_ && tasks_.empty() && local_ended_ >= local_ranks_)) {
    bool did = false;
    for (const auto& store : w_.weight_stores) store->progress();
    try {
      if (!home_lost_) {
        for (int i = 0; i < 64; ++i) {
          auto m = home_.tryRecv();
          if (!m) break;
          handle(*m);
          did = true;
        }
        did |= requestWeights();
        did |= grantCredit();
      }
    } catch (const UcxError& e) {
      home_lost_ = true;
      home_lost_reason_ = e.what();
    } catch (const SiteProtocolError& e) {
      home_lost_ = true;
      home_lost_reason_ = e.what();
      home_.close(1.0);
    }
    if (home_lost_ && !local_ended_sent_) {
      spdlog::error("cross-site: lost home {} ({}); ending the local pool", cfg_.cross_site.connect, home_lost_reason_);
      endLocalStreams();
    }
    // Home ended: once the final versions are mirrored (the local ranks pull them after their
    // end-of-stream), end the local streams.
    if (home_ended_ && !local_ended_sent_ && mirrored()) endLocalStreams();
    did |= feedTasks();
    try {
      did |= forwardTrajectories();
    } catch (const UcxError& e) {
      home_lost_ = true;
      home_lost_reason_ = e.what();
    }
    backoff.after(did);
  }
  if (!home_lost_) {
    try {
      home_.send(kBye, {});
    } catch (const UcxError& e) {
      spdlog::warn("cross-site: could not say bye to home: {}", e.what());
    }
  }
  return report();
}

GatewayReport GatewayRank::report() const {
  GatewayReport r;
  r.tasks_received = tasks_received_;
  r.tasks_dropped = tasks_dropped_;
  r.trajectories_forwarded = trajectories_forwarded_;
  r.trajectories_undelivered = trajectories_undelivered_;
  r.malformed = malformed_;
  r.home_lost = home_lost_;
  for (const auto& p : policies_) {
    r.policies.push_back({p.name, p.updates, p.full_updates, p.bytes, p.rejected, p.replica.version, p.replica.hash});
  }
  return r;
}

}  // namespace

GatewayReport runGatewayRole(RunWiring& w) { return GatewayRank(w).run(); }

}  // namespace astraflow
