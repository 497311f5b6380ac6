#include "astraflow/comm/role_context.hpp"

#include <mpi.h>

namespace astraflow {

double RoleContext::now() const { return MPI_Wtime() - t0; }

void RoleContext::event(const char* kind, double t_start, std::int64_t version, std::uint64_t bytes,
                        std::uint64_t count, const TraceAbout& about) const {
  if (trace)
    trace->record({label_rank, roleName(role), kind, t_start, now(), version, bytes, count, about.policy, about.total,
                   about.staleness});
}

}  // namespace astraflow
