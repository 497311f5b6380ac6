// SiteHub, the home side of cross-site rollout, against a scripted gateway over real UCX on
// loopback (rank 0: the hub with a real weight store; rank 1: the gateway's messages, typed by
// the site protocol). Covered: a hello with another model's version size is refused with the
// reason; a good hello is welcomed; tasks go out only under credit; trajectories come back
// stamped with the site's pool uid; a malformed message loses the site and re-issues exactly the
// tasks it still held (not the one whose trajectory came back). The authenticated link: a gateway
// with another key is refused and counted, and a gateway frame altered on the way (a credit with
// one bit changed) is never handled: the site is lost, its task re-issued, both counted in
// sites_auth_failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/ucx.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "dataflow/site_hub.hpp"
#include "dataflow/site_protocol.hpp"

namespace astraflow {
namespace {

using namespace dataflow_detail;
constexpr double kTimeout = 60.0;
constexpr std::uint64_t kVersionBytes = 4096;
const std::string kToken = "hub-test-token";

Config hubConfig() {
  Config cfg;
  cfg.cross_site.listen = "127.0.0.1:0";
  cfg.cross_site.token = kToken;
  cfg.cross_site.token_env = "";
  return cfg;
}

Task task(std::uint64_t id) {
  Task t;
  t.task_id = id;
  t.problem_id = 100 + id;
  t.policy = "solver";
  t.kind = "arithmetic";
  return t;
}

// Runs the hub's loop until `done` holds (or the timeout, which fails the test). Returned
// trajectories release their task's lease in the same turn, as in the dataflow rank.
template <class Done>
void progressUntil(SiteHub& hub, Done done, std::vector<std::pair<std::uint64_t, std::uint32_t>>& ingested,
                   std::vector<std::uint64_t>& reissued) {
  Backoff backoff;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeout);
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the hub never got there";
    const bool did = hub.progress(
        [&](std::span<const std::byte> record, std::uint32_t pool_uid) {
          const auto t = decodeTrajectory(record);
          ASSERT_TRUE(t) << t.error();
          ingested.emplace_back(t.value().task_id, pool_uid);
          hub.returned(t.value().task_id);  // as the dataflow rank's route() does, at once
        },
        [&](Task t) { reissued.push_back(t.task_id); });
    if (did) {
      backoff.reset();
    } else {
      backoff.wait();
    }
  }
}

UcxLinkOptions gatewayOptions() {
  UcxLinkOptions o;
  o.token = kToken;
  o.protocol_version = site::kProtocolVersion;
  return o;
}

TEST(SiteHub, RefusesAnotherModelThenWelcomesLeasesUnderCreditAndReissuesOnLoss) {
  Comm world = Comm::duplicate(MPI_COMM_WORLD);
  ASSERT_EQ(world.size(), 2) << "registered at 2 ranks";
  const int rank = world.rank();
  Comm self = world.split(rank == 0 ? 0 : -1, 0);  // the hub's weight store lives on rank 0 alone
  int port = 0;
  if (rank == 0) {
    const Config cfg = hubConfig();
    WeightStore store(self, 0, kVersionBytes, "solver");
    SiteHub hub(cfg, {&store}, {"solver"});
    port = hub.port();
    MPI_Bcast(&port, 1, MPI_INT, 0, world.raw());
    std::vector<std::pair<std::uint64_t, std::uint32_t>> ingested;
    std::vector<std::uint64_t> reissued;

    // 1. Another model's version size: refused, never counted as joined.
    progressUntil(
        hub, [&] { return hub.figures().sites_refused >= 1; }, ingested, reissued);
    EXPECT_EQ(hub.openSites(), 0u);
    EXPECT_EQ(hub.figures().sites_joined, 0u);

    // 2. Welcomed; no task goes out before the site grants credit, then exactly its credit.
    progressUntil(
        hub, [&] { return hub.activeSites().size() == 1; }, ingested, reissued);
    EXPECT_EQ(hub.activeSites().front().name, "site_b");
    EXPECT_EQ(hub.activeSites().front().ranks, 3u);
    const std::uint32_t uid = hub.activeSites().front().pool_uid;
    EXPECT_EQ(uid, kSitePoolUidBase);
    int pushed = 0;
    progressUntil(
        hub,
        [&] {
          while (pushed < 2 && hub.tryPush(task(pushed + 1), encode(task(pushed + 1)))) ++pushed;
          return pushed == 2;
        },
        ingested, reissued);
    EXPECT_FALSE(hub.tryPush(task(3), encode(task(3)))) << "a third task went out on a credit of 2";

    // 3. The trajectory of task 1 comes back stamped with the site's uid.
    progressUntil(
        hub, [&] { return !ingested.empty(); }, ingested, reissued);
    ASSERT_EQ(ingested.size(), 1u);
    EXPECT_EQ(ingested[0].first, 1u);
    EXPECT_EQ(ingested[0].second, uid);

    // 4. A malformed credit: the site is lost, task 2 (still held) is re-issued, task 1 is not.
    progressUntil(
        hub, [&] { return !reissued.empty(); }, ingested, reissued);
    EXPECT_EQ(reissued, std::vector<std::uint64_t>{2});
    const SiteHubFigures f = hub.figures();
    EXPECT_EQ(f.sites_malformed, 1u);
    EXPECT_EQ(f.sites_lost, 1u);
    EXPECT_EQ(f.site_tasks_reissued, 1u);
    ASSERT_EQ(f.sites.size(), 1u);
    EXPECT_EQ(f.sites[0].name, "site_b");
    EXPECT_TRUE(f.sites[0].lost);
    EXPECT_EQ(f.sites[0].tasks_sent, 2u);
    EXPECT_EQ(f.sites[0].trajectories, 1u);
    EXPECT_EQ(hub.openSites(), 0u);
    world.barrier();
  } else {
    MPI_Bcast(&port, 1, MPI_INT, 0, world.raw());
    UcpContext context;
    UcpWorker worker(context);
    {
      UcxConnection bad = connectTo(worker, "127.0.0.1", static_cast<std::uint16_t>(port), gatewayOptions(), kTimeout);
      bad.send(site::kHello, site::encode(site::Hello{"site_x", 1, {{"solver", kVersionBytes + 8}}}));
      const UcxMessage answer = bad.recv(kTimeout);
      ASSERT_EQ(answer.kind, site::kRefuse);
      EXPECT_NE(site::decodeRefuse(answer.payload).reason.find("different model config"), std::string::npos);
    }
    UcxConnection home = connectTo(worker, "127.0.0.1", static_cast<std::uint16_t>(port), gatewayOptions(), kTimeout);
    home.send(site::kHello, site::encode(site::Hello{"site_b", 3, {{"solver", kVersionBytes}}}));
    const UcxMessage welcome = home.recv(kTimeout);
    ASSERT_EQ(welcome.kind, site::kWelcome);
    EXPECT_EQ(site::decodeWelcome(welcome.payload).published, std::vector<std::int64_t>{-1});
    home.send(site::kCredit, site::encode(site::Credit{2}));
    std::vector<std::uint64_t> got;
    while (got.size() < 2) {
      const UcxMessage m = home.recv(kTimeout);
      ASSERT_EQ(m.kind, site::kTasks);
      for (const auto record : site::decodeRecordList(m.payload, m.kind).records) {
        const auto t = decodeTask(record);
        ASSERT_TRUE(t) << t.error();
        got.push_back(t.value().task_id);
      }
    }
    EXPECT_EQ(got, (std::vector<std::uint64_t>{1, 2}));
    Trajectory answer;
    answer.task_id = 1;
    answer.policy = "solver";
    answer.tokens = {1, 2};
    answer.behav_logprobs = {0.f, -0.5f};
    answer.policy_mask = {0, 1};
    answer.rewards = {1.0};
    const auto record = encode(answer);
    home.send(site::kTrajectories, site::encode(site::RecordList{{record}}));
    const std::vector<std::byte> truncated_credit(3, std::byte{1});
    home.send(site::kCredit, truncated_credit);
    world.barrier();
  }
}

TEST(SiteHub, CountsAGatewayWithAnotherKeyAndLosesASiteWhoseFrameWasAltered) {
  Comm world = Comm::duplicate(MPI_COMM_WORLD);
  ASSERT_EQ(world.size(), 2) << "registered at 2 ranks";
  const int rank = world.rank();
  Comm self = world.split(rank == 0 ? 0 : -1, 0);
  int port = 0;
  if (rank == 0) {
    const Config cfg = hubConfig();
    WeightStore store(self, 0, kVersionBytes, "solver");
    // The hub goes before the barrier: its worker (gone with it) is what tells the gateway that
    // the link was dropped.
    auto hub_owner =
        std::make_unique<SiteHub>(cfg, std::vector<WeightStore*>{&store}, std::vector<std::string>{"solver"});
    SiteHub& hub = *hub_owner;
    port = hub.port();
    MPI_Bcast(&port, 1, MPI_INT, 0, world.raw());
    std::vector<std::pair<std::uint64_t, std::uint32_t>> ingested;
    std::vector<std::uint64_t> reissued;
    progressUntil(
        hub, [&] { return hub.figures().sites_refused >= 1; }, ingested, reissued);
    EXPECT_EQ(hub.figures().sites_auth_failed, 1u) << "the key mismatch is an authentication failure";
    EXPECT_EQ(hub.figures().sites_joined, 0u);
    progressUntil(
        hub, [&] { return hub.activeSites().size() == 1; }, ingested, reissued);
    bool pushed = false;
    progressUntil(
        hub, [&] { return pushed || (pushed = hub.tryPush(task(1), encode(task(1)))); }, ingested, reissued);
    progressUntil(
        hub, [&] { return !reissued.empty(); }, ingested, reissued);
    EXPECT_EQ(reissued, std::vector<std::uint64_t>{1});
    const SiteHubFigures f = hub.figures();
    EXPECT_EQ(f.sites_auth_failed, 2u);
    EXPECT_EQ(f.sites_lost, 1u);
    EXPECT_EQ(f.sites_malformed, 0u) << "an altered frame never reaches the protocol decoder";
    EXPECT_EQ(f.site_tasks_reissued, 1u);
    hub_owner.reset();
    world.barrier();
  } else {
    MPI_Bcast(&port, 1, MPI_INT, 0, world.raw());
    UcpContext context;
    UcpWorker worker(context);
    UcxLinkOptions wrong = gatewayOptions();
    wrong.token = "not-the-hub-token";
    EXPECT_THROW(connectTo(worker, "127.0.0.1", static_cast<std::uint16_t>(port), wrong, kTimeout),
                 UcxHandshakeRefused);
    UcxConnection home = connectTo(worker, "127.0.0.1", static_cast<std::uint16_t>(port), gatewayOptions(), kTimeout);
    home.send(site::kHello, site::encode(site::Hello{"site_c", 1, {{"solver", kVersionBytes}}}));
    ASSERT_EQ(home.recv(kTimeout).kind, site::kWelcome);
    home.send(site::kCredit, site::encode(site::Credit{1}));
    ASSERT_EQ(home.recv(kTimeout).kind, site::kTasks);
    // A credit of 1 turned into a credit of 129 on the way: one bit of the payload.
    std::vector<std::byte> frame = home.sealFrameForTesting(site::kCredit, site::encode(site::Credit{1}));
    frame[12] ^= std::byte{0x80};
    home.sendUnframedForTesting(frame);
    EXPECT_THROW(
        {
          for (;;) home.recv(kTimeout);  // anything home still had queued, then the closed link
        },
        UcxConnectionClosed);
    world.barrier();
  }
}

}  // namespace
}  // namespace astraflow
