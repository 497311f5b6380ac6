#pragma once
// SiteHub — the home dataflow rank's side of cross-site rollout (docs/cross-site.md): a UCX
// listener that accepts gateways of remote sites, and per site its credits, the tasks it holds
// (leased: re-issued if the site is lost), and the weight updates it asks for. The dataflow loop
// calls progress() every turn; it never blocks on a site: every message to a site is posted to
// its connection's outbox (UcxConnection::post), a site whose outbox is over
// cross_site.outbox_bytes gets no tasks and its weight requests wait, and a site whose link takes
// nothing for cross_site.stall_seconds is lost. Private to src/dataflow.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/ucx.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "dataflow/site_protocol.hpp"
#include "dataflow/task_sink.hpp"

namespace astraflow::dataflow_detail {

struct RemoteSite {
  std::string name;
  UcxConnection link;
  std::uint32_t rollout_ranks = 0;
  std::uint32_t pool_uid = 0;            // kSitePoolUidBase + its index: stamped on its trajectories
  std::int64_t credits = 0;              // tasks it can still take
  std::map<std::uint64_t, Task> leased;  // tasks sent, trajectories not yet back
  bool ended = false;                    // said Bye
  bool lost = false;
  // Weight requests that arrived while its outbox was over budget, by policy (the newest one):
  // answered once it drains, with whatever version is current then.
  std::map<std::uint32_t, site::WeightRequest> deferred;
  std::uint64_t tasks_sent = 0, trajectories = 0, weight_updates = 0, weight_bytes = 0, full_updates = 0;
  std::uint64_t requests_deferred = 0, max_queued_bytes = 0;
  std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
};

class SiteHub final : public TaskSink {
 public:
  // stores[i]: the weight store of policies[i] (the home trainer groups' order).
  SiteHub(const Config& cfg, std::vector<WeightStore*> stores, std::vector<std::string> policies);
  ~SiteHub();

  // Accepts gateways and handles their messages. Trajectory records go to `ingest` (the same
  // path as a local pool's ring); the leased tasks of a site that is lost go to `reissue`.
  bool progress(const std::function<void(std::span<const std::byte>, std::uint32_t pool_uid)>& ingest,
                const std::function<void(Task)>& reissue);
  // Sends one task to the open site with the most credit; false when none has any.
  bool tryPush(const Task& task, std::span<const std::byte> record) override;
  // A policy published a version: every site hears of it (each asks for the update itself).
  void published(std::size_t policy, std::int64_t version);
  // Tells every site to end its streams; later gateways are refused.
  void endStreams();
  // Returns the leased task of a trajectory that came back (by task id).
  void returned(std::uint64_t task_id);

  // Welcomed sites that are neither lost nor ended: (pool uid, name, rollout ranks).
  struct SiteInfo {
    std::uint32_t pool_uid;
    std::string name;
    std::uint32_t ranks;
  };
  std::vector<SiteInfo> activeSites() const;
  std::size_t openSites() const;
  std::uint16_t port() const;          // the listener's (cross_site.listen may name port 0: any free one)
  std::uint64_t rolloutRanks() const;  // of every site welcomed so far
  std::uint64_t lostRanks() const;     // of sites lost before they ended
  SiteHubFigures figures() const;

 private:
  void accept();
  void handle(RemoteSite& site, const UcxMessage& m,
              const std::function<void(std::span<const std::byte>, std::uint32_t)>& ingest);
  void welcome(RemoteSite& site, const UcxMessage& hello);
  void sendUpdate(RemoteSite& site, const site::WeightRequest& request);
  bool overBudget(const RemoteSite& site) const { return site.link.queuedBytes() > outbox_budget_; }
  // Moves its queued frames on; false when the site was lost (stalled).
  bool progressOutbox(RemoteSite& site, const std::function<void(Task)>& reissue);
  void lose(RemoteSite& site, const std::string& why, const std::function<void(Task)>& reissue);

  const Config& cfg_;
  std::vector<WeightStore*> stores_;
  std::vector<std::string> policies_;
  std::vector<std::uint64_t> version_bytes_;
  std::uint64_t outbox_budget_ = 0;
  std::unique_ptr<UcpContext> context_;
  std::unique_ptr<UcpWorker> worker_;
  std::unique_ptr<UcxListener> listener_;
  std::vector<std::unique_ptr<RemoteSite>> sites_;
  std::vector<std::int64_t> published_;
  bool ended_ = false;
  std::size_t joined_ = 0;
  std::uint64_t refused_ = 0, malformed_ = 0, duplicates_ = 0, reissued_ = 0, stalled_ = 0;
  std::uint64_t frames_unauthenticated_ = 0;  // sites dropped for a frame whose tag did not verify
};

}  // namespace astraflow::dataflow_detail
