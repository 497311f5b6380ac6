#pragma once
// A RaaS rank (raas_role.cpp: weights, trajectories, the batch loop; rollout_streaming.cpp: the
// per-episode loop on a sequence source). Private to the rollout module.
#include <optional>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/rollout/episode.hpp"
#include "astraflow/rollout/episode_stream.hpp"
#include "astraflow/rollout/generation_backend.hpp"
#include "astraflow/rollout/raas_role.hpp"
#include "astraflow/rollout/simulated_backend.hpp"
#include "astraflow/tasks/managed_server.hpp"
#include "astraflow/weights/node_weights.hpp"
#include "astraflow/weights/weight_store.hpp"
#include "rollout/served_weights.hpp"

namespace astraflow::rollout_detail {

// One policy this rank serves: its model, the backend it generates with and the version it holds.
struct ServedPolicy {
  std::string name;
  WeightStore* store = nullptr;
  PolicyModel model{nullptr};  // engine: the generating model; http: the CPU model versions are written from
  std::unique_ptr<GenerationEngine> engine;                // engine backend only
  std::unique_ptr<GenerationBackend> backend;              // what episodes generate with
  HttpBackend* http = nullptr;                             // the backend, when it is an external server
  SimulatedBackend* simulated = nullptr;                   // the backend, when it is simulated (no model)
  std::unique_ptr<rollout_detail::ServedWeights> folders;  // http: versions as folders for the server
  int group = 0;                                           // index of its trainer group and weight store
  NodeWeights* node = nullptr;  // the version as its node holds it, shared by the node's rollout ranks
  NodeVersion held;             // the node's version this rank moved to last (its bytes: while bound)
  bool in_place = false;        // the engine computes from the node's bytes (bf16 on the CPU), so stays bound
  std::int64_t version = -1;    // the version generating now (http: the one the server confirmed loading)
  std::uint64_t pulls = 0;
  bool probed = false;  // http: the server's log-probs were checked against the model (server_probe.hpp)
  // backend.launch: the policy's server, started at its first version; which start of it the
  // backend talks to, and when this rank last asked whether it died (run clock).
  std::unique_ptr<ManagedServer> server;
  int server_generation = 0;
  bool server_loading = false;  // started again: takes requests once it loaded the version held
  double server_checked = -1e300;
  double load_retry_at = 0,
         load_backoff = 0;  // a failed load of a restarted server is tried again 1 s, 2 s, … 30 s later
  // Per episode: the simulated accelerator sequence by sequence (batching continuous), or the
  // server's requests one by one (declared after `backend`, which they use: destroyed first).
  std::unique_ptr<SimulatedSequences> simulated_sequences;
  std::unique_ptr<HttpSequences> http_sequences;

  // What its episodes run on when the rank works per episode; null: batches only.
  SequenceSource* sequences() {
    if (engine) return &engine->scheduler();
    if (http_sequences) return http_sequences.get();
    return simulated_sequences.get();
  }
};

class StreamingLoop;

class RolloutRank {
 public:
  explicit RolloutRank(const RolloutPorts& ports);

  RolloutReport run();

 private:
  friend class StreamingLoop;  // the per-episode loop's steps (rollout_streaming.cpp)

  // Tasks in batches, one generate call each (http, simulated and team workflows).
  void runBatches();
  // Single-agent episodes one by one on a sequence source (rollout_streaming.cpp).
  void runStreaming();
  bool streams();
  // The rollout or evaluation sampling settings at the version held now.
  SamplingOptions samplingFor(bool eval) const;
  // A newer version is due (weights.pull_every), or a task waits for one.
  bool pullDue() const;
  // Lets MPI answer child nodes' reads of this node's weight copies (NodeWeights::serve): at
  // every step of the loop and every refresh.
  void serveRelays() const {
    for (const auto& p : served_) p.node->serve();
  }
  bool needsNewerVersion(const Task& task) const;
  // Pops one task: nullopt when the ring is empty or its next poll is not due yet (task_polls_);
  // an end-of-stream task sets `ended`.
  std::optional<Task> popTask(bool& ended);
  // With nothing to run: sleeps until the task ring's next poll is due.
  void idleUntilTaskPoll() const { task_polls_.sleepUntilDue(); }
  void noteTaskWait(double& idle_since);
  RolloutReport report();
  ServedPolicy& served(const std::string& policy);
  // Pulls each policy the store is at least `weights.pull_every` versions ahead on (any newer
  // version when `force`, i.e. a task needs it).
  bool refreshWeights(bool force = false);
  void waitForVersions(const std::vector<Task>& tasks);
  // Some served policy is on an older version than its store publishes.
  bool behindPublished() const;
  void runTasks(const std::vector<Task>& tasks, bool eval);
  void runSingle(const std::vector<Task>& tasks, ServedPolicy& p, const SamplingOptions& sampling, bool eval);
  void runTeam(const std::vector<Task>& tasks, const SamplingOptions& sampling, bool eval);
  Trajectory trajectoryOf(const Task& task, const Episode& e, const ServedPolicy& p, double t_start, double t_end);
  void pushTrajectory(const Trajectory& t);
  // A task taken and never started goes back to the dataflow rank (a Returned record).
  void giveBack(const Task& task);
  // The server of an http policy loads the version this rank holds; false when it did not.
  bool loadOnServer(ServedPolicy& p);
  void checkServerLogprobs(ServedPolicy& p);
  // backend.launch (server_launch.cpp): starts the policy's server from `folder` (its first
  // version), or adopts the node's; throws Error when it does not come up.
  void startServer(ServedPolicy& p, const std::filesystem::path& folder);
  // Each launched server that stopped answering and has died is started again (at most ten
  // checks a second per policy, up to backend.launch.max_restarts times); its requests in flight
  // have failed and their episodes go back to be re-issued; the new one takes requests once it has
  // loaded the version this rank holds.
  void reviveServers();
  // A served policy's server has been silent past backend.lost_after_seconds, or its launched
  // server was given up (backend.launch.max_restarts); lostServer() says which and why.
  bool serverLost() const;
  std::string lostServer() const;

  const RolloutPorts& ports_;
  const RoleContext& ctx_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<ServedPolicy> served_;
  torch::Device device_;  // every served policy's engine: rollout.device
  at::Generator generator_;
  std::vector<std::byte> record_;
  // An empty task ring is polled again after 1 ms, doubling to 20 ms (docs/rollout-backends.md,
  // "Polling the task ring"): a rank running sequences asks it at most every step, and an
  // idle one sleeps between asks.
  PollPacer task_polls_{std::chrono::milliseconds(1), std::chrono::milliseconds(20)};
  // Report.
  std::uint64_t pushed_ = 0, eval_pushed_ = 0, oversize_ = 0, malformed_ = 0, tokens_ = 0, failed_episodes_ = 0;
  std::uint64_t context_cut_ = 0;        // transcripts cut to the policy's model.max_seq_len (trajectoryOf)
  bool update_failed_ = false;           // the last refresh could not get a server to load its version
  bool lost_ = false;                    // a server stayed silent past backend.lost_after_seconds: the rank left
  std::uint64_t returned_ = 0;           // tasks given back to the dataflow rank
  std::uint64_t spanning_versions_ = 0;  // trajectories whose tokens came from more than one version
  RolloutReport reasons_;                // only its reward_* counts: why training episodes got their rewards
  double generate_seconds_ = 0, wait_seconds_ = 0, pull_seconds_ = 0, write_seconds_ = 0;
  EpisodeStreamCounters stream_counters_;  // the per-episode path's, summed over its streams (rollout_streaming.cpp)
};

std::vector<std::uint64_t> problemsOf(const std::vector<Task>& tasks);

}  // namespace astraflow::rollout_detail
