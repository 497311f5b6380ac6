// processLocation(): the "host <h> rank <r>" of error messages, the rank from MPI or, before MPI_Init, from the
// launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK).
#include "astraflow/core/error.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace astraflow {

std::string processLocation() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  int rank = -1;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  } else if (const char* env = std::getenv("OMPI_COMM_WORLD_RANK")) {
    rank = std::atoi(env);
  } else if (const char* pmi = std::getenv("PMI_RANK")) {
    rank = std::atoi(pmi);
  }
  return "host " + std::string(host) + " rank " + (rank >= 0 ? std::to_string(rank) : "?");
}

}  // namespace astraflow
