#pragma once
// What every role loop is given by the run, whatever its role: the config, which rank it is,
// the run clock and the trace it records into. The rings and weight stores a role uses come
// beside it, in that role's own ports (RolloutPorts, TrainerPorts, the dataflow's RunWiring).
#include <cstdint>
#include <filesystem>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/rank_report.hpp"
#include "astraflow/core/trace_event.hpp"
#include "astraflow/core/trace_kinds.hpp"

namespace astraflow {

struct RoleContext {
  explicit RoleContext(const Config& c) : cfg(c) {}

  const Config& cfg;
  int rank = 0;        // in the job's world communicator
  int label_rank = 0;  // in traces and trajectories (a spawned pool's ranks are offset to stay unique)
  Role role = Role::Rollout;
  int ranks_on_node = 1;          // sizes LibTorch/BLAS threads (run.threads_per_rank = 0)
  int device_slot = 0;            // among this node's ranks asking for plain `cuda`: picks its GPU
  double t0 = 0;                  // the run clock's zero in MPI_Wtime() (same on every rank up to skew)
  double clock_offset = 0;        // run time of earlier segments: a resumed run's clock continues
  TraceSink* trace = nullptr;     // null: events are not recorded
  ReportSink* reports = nullptr;  // null: the figures are reported only at the end
  std::filesystem::path run_dir;
  std::string run_id;                // the folder's run (core/run_files.hpp): stamped on every checkpoint
  std::int64_t resume_version = -1;  // >= 0: the run resumes from this checkpoint

  bool resuming() const { return resume_version >= 0; }
  double now() const;  // seconds on the run clock (earlier segments included)
  void event(TraceKind kind, double t_start, std::int64_t version, std::uint64_t bytes = 0, std::uint64_t count = 0,
             const TraceAbout& about = {}) const;
  // Leaves the role's figures so far (made by `make` only when due) for a run that is killed.
  template <class MakeReport>
  void snapshot(MakeReport&& make) const {
    if (reports && reports->due()) reports->write(RoleReport(make()));
  }
};

}  // namespace astraflow
