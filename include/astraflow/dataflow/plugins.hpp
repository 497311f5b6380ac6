#pragma once
// Data-algorithm plug-ins of the dataflow layer (docs/architecture.md §4): composed by name from the
// config, each with its own parameters, counters and checkpointed state. Trainers, RaaS ranks
// and the orchestration never see them.
//
//   Curator  (pre-rollout)   admit or skip a prompt; observes each finished group's rewards
//   Filter   (post-rollout)  keep or drop a complete group
//   Sampler  (batch serving) which ready groups form a trainer batch (fresh, replayed, …)
//   Router                   which policy's batches a trajectory joins
//
// A plug-in is registered by name with a factory (`registerFilter("name", factory)`, …); the
// built-in ones register themselves on first use of a registry. A test or an extension adds
// its own with the same calls, no core file changed. Pure logic: no MPI, no tensors.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/records.hpp"

namespace astraflow {

// Counted per plug-in instance and reported under its name in summary.json and the trace.
struct PluginCounters {
  std::uint64_t admitted = 0;  // curators: prompts let through
  std::uint64_t skipped = 0;   // curators: prompts skipped
  std::uint64_t kept = 0;      // filters: groups kept
  std::uint64_t dropped = 0;   // filters: groups dropped (their trajectories count as filtered)
  std::uint64_t replayed = 0;  // samplers: trajectories served again from a replay pool
  std::uint64_t errors = 0;    // calls that threw (the data was kept; see docs/data-algorithms.md)
};

// A complete GRPO group held by the dataflow layer.
struct ReadyGroup {
  std::vector<Trajectory> members;
  std::int64_t oldest_version = 0;  // min weight_version_min of the members
  std::uint64_t group_id() const { return members.empty() ? 0 : members.front().group_id; }
};

// Common to all plug-ins: identity, counters and checkpointed state (opaque text, usually JSON).
class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual std::string name() const = 0;
  virtual std::string saveState() const { return {}; }
  virtual void loadState(const std::string& state) { (void)state; }
  PluginCounters& counters() { return counters_; }
  const PluginCounters& counters() const { return counters_; }

 private:
  PluginCounters counters_;
};

struct PromptInfo {
  std::uint64_t problem_id = 0;
  std::int64_t version = 0;                     // trainer version at admission
  std::map<std::string, std::string> metadata;  // the environment's metadata of the problem
};

class Curator : public Plugin {
 public:
  virtual bool admit(const PromptInfo& prompt, std::mt19937_64& rng) = 0;
  // Every complete group: its prompt and its members' rewards (members dropped for non-finite
  // values excluded).
  virtual void observe(const PromptInfo& prompt, const std::vector<double>& rewards) { (void)prompt, (void)rewards; }
};

class Filter : public Plugin {
 public:
  virtual bool keep(const ReadyGroup& group) = 0;
};

class Sampler : public Plugin {
 public:
  // Takes `count` groups for the batch of trainer version `version` out of `ready` (every group
  // there is within the staleness bound) into `out`. Returns false, leaving `ready` untouched,
  // when it cannot fill the batch yet.
  virtual bool take(std::deque<ReadyGroup>& ready, std::size_t count, std::int64_t version, std::mt19937_64& rng,
                    std::vector<ReadyGroup>& out) = 0;
  // The staleness bound of data this sampler serves (a replay pool may serve older data than
  // η); the trainer checks against max(η, this).
  virtual std::int64_t maxStaleness() const { return 0; }
  // Expected share of batch slots filled with fresh groups. The admission rule scales the
  // batch by it, so producers make only what batches will take while it is fresh.
  virtual double freshFraction() const { return 1.0; }
};

class Router : public Plugin {
 public:
  // Index into `policies` of the policy whose batches the trajectory joins; −1: no policy.
  virtual int route(const Trajectory& trajectory, const std::vector<std::string>& policies) = 0;
};

template <class T>
using PluginFactory = std::function<std::unique_ptr<T>(const PluginSpec&)>;

void registerCurator(const std::string& kind, PluginFactory<Curator> factory);
void registerFilter(const std::string& kind, PluginFactory<Filter> factory);
void registerSampler(const std::string& kind, PluginFactory<Sampler> factory);
void registerRouter(const std::string& kind, PluginFactory<Router> factory);

// Throw ConfigError naming spec.key, the kind and the registered kinds for an unknown kind.
std::unique_ptr<Curator> makeCurator(const PluginSpec& spec);
std::unique_ptr<Filter> makeFilter(const PluginSpec& spec);
std::unique_ptr<Sampler> makeSampler(const PluginSpec& spec);
std::unique_ptr<Router> makeRouter(const PluginSpec& spec);

std::vector<std::string> curatorKinds();
std::vector<std::string> filterKinds();
std::vector<std::string> samplerKinds();
std::vector<std::string> routerKinds();

// Lets parseConfig build every plug-in of a dataflow section to check it (core/config_checks.hpp).
void registerDataflowConfigChecks();

// The oldest data a batch may hold under this config: η (0 in sync mode), or the sampler's own
// bound when it serves older data (a replay pool). Trainers check every batch against it.
std::int64_t servedStalenessBound(const Config& cfg);

}  // namespace astraflow
