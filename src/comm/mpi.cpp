// MpiEnvironment (MPI_Init_thread and MPI_Finalize, with osc defaulted to sm,ucx) and throwMpiError, which turns a
// failed MPI call into an MpiError naming host, rank, file:line, the call and MPI's own text.
#include "astraflow/comm/mpi.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace astraflow {

void throwMpiError(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
    fmt::format_to_n(text, sizeof text - 1, "MPI error code {}", code);
  }
  throw MpiError(code, fmt::format("{}: {}:{}: {} failed: {}", processLocation(), file, line, call, text));
}

static const char* threadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv, int required_thread_level) {
  // Open MPI 4.1's osc/rdma component, its default for windows on one node, crashes inside
  // btl/vader on MPI_Compare_and_swap and MPI_Win_sync progress (open-mpi/ompi#11349; seen
  // here on 4.1.4). osc/sm serves single-node windows and osc/ucx multi-node ones. A value
  // the user set in the environment (or with mpirun --mca osc) wins.
  setenv("OMPI_MCA_osc", "sm,ucx", /*overwrite=*/0);
  ASTRA_MPI_CHECK(MPI_Init_thread(argc, argv, required_thread_level, &provided_));
  // From here on errors on MPI_COMM_WORLD return codes instead of aborting the job.
  ASTRA_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (provided_ < required_thread_level) {
    throw MpiError(MPI_ERR_OTHER, fmt::format("{}: MPI provides {} but astraflow needs {}", processLocation(),
                                              threadLevelName(provided_), threadLevelName(required_thread_level)));
  }
}

MpiEnvironment::~MpiEnvironment() {
  if (finalize_ && initialized() && !finalized()) {
    if (MPI_Finalize() != MPI_SUCCESS) spdlog::error("MPI_Finalize failed");
  }
}

bool MpiEnvironment::initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

int MpiEnvironment::worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int MpiEnvironment::worldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void MpiEnvironment::abortJob(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
}

bool MpiEnvironment::finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

}  // namespace astraflow
