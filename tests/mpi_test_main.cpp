// The one GoogleTest main of every astraflow test binary (plain and MPI tests alike):
// MPI is initialised around the whole run, and only rank 0 prints results so a 4-rank run
// reads like a 1-rank one. A failing rank still fails the run (its exit code is non-zero).
#include <gtest/gtest.h>
#include <mpi.h>

#include "astraflow/comm/mpi.hpp"

#include <cstdio>
#include <string>

namespace {

// On ranks other than 0: print only failures, each tagged with the rank that saw it.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // current_test_info() would take the lock gtest holds while reporting a result.
  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  astraflow::MpiEnvironment mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Keep failures visible from every rank, drop the per-test chatter.
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int local = RUN_ALL_TESTS();
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return global;
}
