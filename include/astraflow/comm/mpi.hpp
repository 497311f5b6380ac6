#pragma once
// MPI ownership basics: the typed error, the check macro, and the environment (init/finalize).
#include <mpi.h>

#include <string>

#include "astraflow/core/error.hpp"

namespace astraflow {

// An MPI call failed. The message carries host, rank, file:line, the call and MPI's own text.
class MpiError : public Error {
 public:
  MpiError(int code, const std::string& message) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] void throwMpiError(int code, const char* call, const char* file, int line);

#define ASTRA_MPI_CHECK(call)                                               \
  do {                                                                      \
    const int astra_mpi_rc_ = (call);                                       \
    if (astra_mpi_rc_ != MPI_SUCCESS) {                                     \
      ::astraflow::throwMpiError(astra_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                       \
  } while (0)

// Owns MPI_Init_thread / MPI_Finalize for one process. Checks that the provided thread level
// is at least the one required and throws MpiError otherwise.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv, int required_thread_level = MPI_THREAD_FUNNELED);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int providedThreadLevel() const { return provided_; }
  // After a peer was lost MPI_Finalize can hang (docs/architecture.md §9): the caller flushes its
  // files and leaves with _exit instead; this makes the destructor skip MPI_Finalize.
  void skipFinalize() { finalize_ = false; }

  static bool initialized();
  static bool finalized();
  // This process's rank in the job and the job's size (MPI_COMM_WORLD).
  static int worldRank();
  static int worldSize();
  // Ends every process of the job (MPI_Abort on MPI_COMM_WORLD): for an error met by one rank
  // alone while the others may wait on it.
  [[noreturn]] static void abortJob(int code);

 private:
  int provided_ = MPI_THREAD_SINGLE;
  bool finalize_ = true;
};

}  // namespace astraflow
