// SiteHub: the home dataflow rank's side of cross-site rollout: a UCX listener for remote gateways and, per site, its
// credits, leased tasks and weight updates, all sent through non-blocking outboxes; a site whose link stalls is lost.
#include "dataflow/site_hub.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "astraflow/dataflow/run_wiring.hpp"
#include "dataflow/site_protocol.hpp"

namespace astraflow::dataflow_detail {

using namespace site;

SiteHub::SiteHub(const Config& cfg, std::vector<WeightStore*> stores, std::vector<std::string> policies)
    : cfg_(cfg), stores_(std::move(stores)), policies_(std::move(policies)), published_(policies_.size(), -1) {
  for (auto* s : stores_) version_bytes_.push_back(s->capacity());
  UcxLinkOptions options;
  options.token = resolveToken(cfg.cross_site);
  options.protocol_version = kProtocolVersion;
  // The largest message is one full version of the largest policy (plus its header).
  const std::uint64_t largest = *std::max_element(version_bytes_.begin(), version_bytes_.end());
  options.max_message_bytes = largest + (1u << 20);
  outbox_budget_ = cfg.cross_site.outbox_bytes > 0 ? cfg.cross_site.outbox_bytes : 2 * largest + (1u << 20);
  context_ = std::make_unique<UcpContext>();
  worker_ = std::make_unique<UcpWorker>(*context_);
  const auto [host, port] = splitHostPort(cfg.cross_site.listen);
  listener_ = std::make_unique<UcxListener>(*worker_, host, port, options);
  spdlog::info("cross-site: listening for gateways on {}:{}", host, listener_->port());
}

SiteHub::~SiteHub() = default;

std::uint16_t SiteHub::port() const { return listener_->port(); }

void SiteHub::accept() {
  auto conn = listener_->tryAccept();
  refused_ = listener_->refusedCount();
  if (!conn) return;
  auto site = std::make_unique<RemoteSite>();
  site->link = std::move(*conn);
  site->name = site->link.peer();
  if (ended_) {
    site->link.post(kRefuse, encode(Refuse{"the home run has ended"}));
    ++refused_;
    return;
  }
  sites_.push_back(std::move(site));
}

// The hello must name every home policy with the same version size (the same model config).
void SiteHub::welcome(RemoteSite& site, const UcxMessage& hello) {
  const Hello h = decodeHello(hello.payload);
  const std::string& name = h.site;
  const auto ranks = h.rollout_ranks;
  std::map<std::string, std::uint64_t> served;
  std::vector<std::string> order;
  for (const auto& p : h.policies) {
    order.push_back(p.name);
    served[p.name] = p.version_bytes;
  }
  std::string refusal;
  // Weight requests name policies by index: both sites must list them in the same order.
  if (order != policies_ && order.size() == policies_.size()) {
    refusal = fmt::format("site '{}' lists its policies as [{}], home as [{}] (trainer order): list them alike", name,
                          fmt::join(order, ", "), fmt::join(policies_, ", "));
  }
  for (std::size_t i = 0; i < policies_.size() && refusal.empty(); ++i) {
    const auto it = served.find(policies_[i]);
    if (it == served.end()) {
      refusal = fmt::format("site '{}' does not serve policy '{}' (home policies: {})", name, policies_[i],
                            fmt::join(policies_, ", "));
    } else if (it->second != version_bytes_[i]) {
      refusal = fmt::format("policy '{}' is {} bytes per version at site '{}' and {} at home (different model config)",
                            policies_[i], it->second, name, version_bytes_[i]);
    }
  }
  if (ranks == 0 && refusal.empty()) refusal = fmt::format("site '{}' has no rollout ranks", name);
  if (!refusal.empty()) {
    spdlog::warn("cross-site: refused gateway {}: {}", site.link.peer(), refusal);
    site.link.post(kRefuse, encode(Refuse{refusal}));
    site.lost = true;  // never welcomed: no ranks counted
    site.link.close(1.0);
    ++refused_;
    return;
  }
  site.name = name;
  site.rollout_ranks = ranks;
  site.pool_uid = kSitePoolUidBase + static_cast<std::uint32_t>(joined_++);
  site.link.post(kWelcome, encode(Welcome{published_}));
  spdlog::info("cross-site: site '{}' joined from {} with {} rollout rank(s)", name, site.link.peer(), ranks);
}

void SiteHub::sendUpdate(RemoteSite& site, const WeightRequest& r) {
  if (r.policy >= stores_.size()) throw SiteProtocolError(fmt::format("weight request for policy #{}", r.policy));
  const StoreUpdate u = stores_[r.policy]->updateFor(r.version, r.hash, static_cast<int>(r.deltas_since_full), r.full);
  WeightUpdate out{r.policy, u.full, u.version, u.hash, {}};
  std::uint64_t bytes = 0;
  for (const auto& part : u.parts) {
    out.parts.emplace_back(part.data(), part.size());
    bytes += part.size();
  }
  site.link.post(kWeightUpdate, encode(out));
  site.weight_updates++;
  site.weight_bytes += bytes;
  site.full_updates += u.full ? 1 : 0;
}

void SiteHub::handle(RemoteSite& site, const UcxMessage& m,
                     const std::function<void(std::span<const std::byte>, std::uint32_t)>& ingest) {
  if (site.rollout_ranks == 0 && m.kind != kHello) {
    throw SiteProtocolError(fmt::format("{} message before hello", kindName(m.kind)));
  }
  switch (m.kind) {
    case kHello: welcome(site, m); return;
    case kCredit: {
      site.credits += decodeCredit(m.payload).tasks;
      return;
    }
    case kTrajectories: {
      for (const auto record : decodeRecordList(m.payload, m.kind).records) {
        ingest(record, site.pool_uid);
        site.trajectories++;
      }
      return;
    }
    case kWeightRequest: {
      const WeightRequest r = decodeWeightRequest(m.payload);
      if (overBudget(site)) {
        // Its link is behind: answer when it has drained, with the version current then (a
        // full one when the deltas it would need have left the log).
        site.deferred[r.policy] = r;
        site.requests_deferred++;
      } else {
        sendUpdate(site, r);
      }
      return;
    }
    case kBye:
      site.ended = true;
      spdlog::info("cross-site: site '{}' ended ({} tasks sent, {} trajectories back)", site.name, site.tasks_sent,
                   site.trajectories);
      return;
    default:
      throw SiteProtocolError(fmt::format("unexpected {} message (kind {}) from a gateway", kindName(m.kind), m.kind));
  }
}

void SiteHub::lose(RemoteSite& site, const std::string& why, const std::function<void(Task)>& reissue) {
  site.lost = true;
  spdlog::warn("cross-site: lost site '{}' ({}); re-issuing its {} leased task(s)", site.name, why, site.leased.size());
  for (auto& [id, task] : site.leased) {
    ++reissued_;
    reissue(std::move(task));
  }
  site.leased.clear();
  site.deferred.clear();
  site.link.abort("lost: " + why);  // forced: a stalled link's queued frames are cancelled, not waited for
}

bool SiteHub::progressOutbox(RemoteSite& site, const std::function<void(Task)>& reissue) {
  site.link.progressSends();
  site.max_queued_bytes = std::max(site.max_queued_bytes, site.link.queuedBytes());
  const double stall = cfg_.cross_site.stall_seconds;
  if (site.link.oldestQueuedSeconds() > stall) {
    lose(site,
         fmt::format("its link took none of {} queued bytes for {:.0f} s (cross_site.stall_seconds)",
                     site.link.queuedBytes(), stall),
         reissue);
    ++stalled_;
    return false;
  }
  // A site that owes home something — trajectories of the tasks it holds, or its Bye once the
  // run has ended — and says nothing for as long is lost too: it would hold the run's end.
  const double silent = std::chrono::duration<double>(std::chrono::steady_clock::now() - site.last_heard).count();
  // (Not while home's own frames to it are queued: then it may well be waiting for them.)
  if (site.rollout_ranks > 0 && site.link.queuedFrames() == 0 && (!site.leased.empty() || ended_) && silent > stall) {
    lose(site, fmt::format("silent for {:.0f} s while it owes tasks or its end (cross_site.stall_seconds)", silent),
         reissue);
    ++stalled_;
    return false;
  }
  if (!overBudget(site)) {
    while (!site.deferred.empty() && !overBudget(site)) {
      const WeightRequest r = site.deferred.begin()->second;
      site.deferred.erase(site.deferred.begin());
      sendUpdate(site, r);
    }
  }
  return true;
}

bool SiteHub::progress(const std::function<void(std::span<const std::byte>, std::uint32_t)>& ingest,
                       const std::function<void(Task)>& reissue) {
  bool did = false;
  worker_->progress();
  accept();
  for (auto& s : sites_) {
    if (s->lost || s->ended) continue;
    try {
      if (!progressOutbox(*s, reissue)) continue;
      for (int i = 0; i < 64; ++i) {
        auto m = s->link.tryRecv();
        if (!m) break;
        did = true;
        s->last_heard = std::chrono::steady_clock::now();
        handle(*s, *m, ingest);
        if (s->lost) break;
      }
    } catch (const SiteProtocolError& e) {
      ++malformed_;
      lose(*s, e.what(), reissue);
    } catch (const UcxAuthenticationFailed& e) {
      // Altered, replayed or injected on the way: the frame (a weight request, trajectories) was
      // refused before it was handled. The connection logged it with the peer's address.
      ++frames_unauthenticated_;
      lose(*s, e.what(), reissue);
    } catch (const UcxError& e) {
      lose(*s, e.what(), reissue);
    }
  }
  return did;
}

bool SiteHub::tryPush(const Task& task, std::span<const std::byte> record) {
  RemoteSite* best = nullptr;
  for (auto& s : sites_) {
    if (s->lost || s->ended || s->rollout_ranks == 0 || s->credits <= 0 || overBudget(*s)) continue;
    if (!best || s->credits > best->credits) best = s.get();
  }
  if (!best) return false;
  try {
    best->link.post(kTasks, encode(RecordList{{record}}));
  } catch (const UcxError&) {
    return false;  // progress() finds the link closed and re-issues what the site holds
  }
  best->credits--;
  best->tasks_sent++;
  best->leased.emplace(task.task_id, task);
  return true;
}

void SiteHub::returned(std::uint64_t task_id) {
  for (auto& s : sites_) {
    if (s->leased.erase(task_id)) return;
  }
}

void SiteHub::published(std::size_t policy, std::int64_t version) {
  published_.at(policy) = version;
  const auto message = encode(Published{static_cast<std::uint32_t>(policy), version});
  for (auto& s : sites_) {
    if (s->lost || s->ended || s->rollout_ranks == 0) continue;
    try {
      s->link.post(kPublished, message);
    } catch (const UcxError&) {
      // progress() notices the closed link and handles the loss.
    }
  }
}

void SiteHub::endStreams() {
  ended_ = true;
  for (auto& s : sites_) {
    if (s->lost || s->ended || s->rollout_ranks == 0) continue;
    try {
      s->link.post(kEnd, {});
    } catch (const UcxError&) {
    }
  }
}

std::vector<SiteHub::SiteInfo> SiteHub::activeSites() const {
  std::vector<SiteInfo> out;
  for (const auto& s : sites_) {
    if (!s->lost && !s->ended && s->rollout_ranks > 0) out.push_back({s->pool_uid, s->name, s->rollout_ranks});
  }
  return out;
}

std::size_t SiteHub::openSites() const {
  return static_cast<std::size_t>(
      std::count_if(sites_.begin(), sites_.end(), [](const auto& s) { return !s->lost && s->rollout_ranks > 0; }));
}

std::uint64_t SiteHub::rolloutRanks() const {
  std::uint64_t n = 0;
  for (const auto& s : sites_) n += s->rollout_ranks;
  return n;
}

std::uint64_t SiteHub::lostRanks() const {
  std::uint64_t n = 0;
  for (const auto& s : sites_) n += s->lost && !s->ended ? s->rollout_ranks : 0;
  return n;
}

SiteHubFigures SiteHub::figures() const {
  SiteHubFigures f;
  f.sites_refused = refused_;
  f.sites_malformed = malformed_;
  f.site_tasks_reissued = reissued_;
  f.sites_stalled = stalled_;
  f.sites_auth_failed = listener_->authFailures() + frames_unauthenticated_;
  for (const auto& s : sites_) {
    if (s->rollout_ranks == 0) continue;
    SiteFigures site;
    site.name = s->name;
    site.rollout_ranks = static_cast<std::uint64_t>(s->rollout_ranks);
    site.tasks_sent = s->tasks_sent;
    site.trajectories = s->trajectories;
    site.weight_updates = s->weight_updates;
    site.weight_full_updates = s->full_updates;
    site.weight_bytes = s->weight_bytes;
    site.weight_requests_deferred = s->requests_deferred;
    site.max_queued_bytes = s->max_queued_bytes;
    site.lost = s->lost && !s->ended;
    f.sites_lost += site.lost ? 1 : 0;
    f.sites.push_back(std::move(site));
  }
  f.sites_joined = f.sites.size();
  return f;
}

}  // namespace astraflow::dataflow_detail
