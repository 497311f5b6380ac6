#pragma once
// Typed run configuration, parsed from YAML (docs/configuration.md lists every key).
// Parsing never touches MPI: `astraflow validate` and the first step of `astraflow run`
// use it before any rank talks to another.
#include <cstdint>
#include <string>
#include <vector>

namespace astraflow {

enum class Role { Dataflow, Trainer, Rollout };
const char* roleName(Role role);

struct RunSection {
  std::string name = "astraflow";
  std::string output_dir = "runs/astraflow";  // the run folder: checkpoints, traces, summary
  std::uint64_t seed = 1;
  std::string log_level = "info";  // trace|debug|info|warn|error
  int threads_per_rank = 0;        // LibTorch/OpenBLAS threads; 0 = cores on node / ranks on node
};

struct PolicySection {
  std::string name;
  int line = 0;
};

// One entry of `layout`: consecutive world ranks given one role.
struct LayoutEntry {
  Role role = Role::Rollout;
  int ranks = 1;
  std::string policy;                 // trainer: the policy it trains
  std::vector<std::string> policies;  // rollout: the policies the pool serves
  std::string pool;                   // rollout: pool name (default pool<i>)
  int line = 0;
};

// Geometry of one RMA ring (ARCHITECTURE §5): `slots` slots of `slot_bytes` payload each.
struct RingSection {
  std::uint64_t slots = 256;
  std::uint64_t slot_bytes = 1024;
};

struct DataflowSection {
  RingSection task_ring{256, 512};
  RingSection trajectory_ring{1024, 4096};
  RingSection batch_ring{8, 1u << 20};
  int max_staleness = 4;  // η, in weight versions
};

struct Config {
  std::string source;  // file name the config came from (for messages)
  RunSection run;
  std::vector<PolicySection> policies;
  std::vector<LayoutEntry> layout;
  DataflowSection dataflow;

  int layoutRanks() const;  // world size the layout needs
  const PolicySection* findPolicy(const std::string& name) const;
};

// Throws ConfigError naming file, line, key path, the value given and what is allowed.
Config loadConfig(const std::string& path);
Config parseConfig(const std::string& yaml_text, const std::string& source_name);

}  // namespace astraflow
