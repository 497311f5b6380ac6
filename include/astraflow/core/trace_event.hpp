#pragma once
// One timeline event of a rank, and the sink role loops record into. The sink is an interface
// here so the roles (rollout, trainer) record events without depending on io, which owns the
// HDF5 file behind it (io::TraceWriter; layout in include/astraflow/io/trace_writer.hpp).
#include <cstdint>
#include <string>

namespace astraflow {

struct TraceEvent {
  std::int32_t rank = 0;
  std::string role;  // stored in 16 bytes; longer values are cut (at a UTF-8 boundary)
  std::string kind;  // stored in 24 bytes; likewise
  double t_start = 0;
  double t_end = 0;
  std::int64_t version = 0;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;      // items the event handled: trajectories, tokens, … (docs/runtime-notes.md)
  std::int32_t policy = -1;     // the policy (trainer group index) the event is about; -1: none
  std::uint64_t total = 0;      // the whole `count` is a part of, where it is one (eval: problems; books: produced)
  std::int32_t staleness = -1;  // versions the event's items lag the trainer (batch_staleness); -1: none

  bool operator==(const TraceEvent&) const = default;
};

// What an event is about beyond its version, bytes and items: the fields of TraceEvent that only
// some kinds carry (written at the call site as {.policy = g}, {.total = n}, …).
struct TraceAbout {
  std::int32_t policy = -1;
  std::uint64_t total = 0;
  std::int32_t staleness = -1;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(const TraceEvent& event) = 0;
};

}  // namespace astraflow
