// RoleContext's run clock (now(): MPI_Wtime less t0) and event(), which records one span of a role into the trace.
#include "astraflow/comm/role_context.hpp"

#include <mpi.h>

namespace astraflow {

double RoleContext::now() const { return MPI_Wtime() - t0; }

void RoleContext::event(TraceKind kind, double t_start, std::int64_t version, std::uint64_t bytes, std::uint64_t count,
                        const TraceAbout& about) const {
  if (trace)
    trace->record({label_rank, roleName(role), traceKindName(kind), t_start, now(), version, bytes, count, about.policy,
                   about.total, about.staleness});
}

}  // namespace astraflow
