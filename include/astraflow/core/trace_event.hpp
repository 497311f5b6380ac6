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
  std::uint64_t count = 0;  // items the event handled: trajectories, tokens, … (docs/runtime-notes.md)

  bool operator==(const TraceEvent&) const = default;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(const TraceEvent& event) = 0;
};

}  // namespace astraflow
