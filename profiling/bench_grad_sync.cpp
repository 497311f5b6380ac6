// mpirun -np N bench_grad_sync [reps=5]: trainer.grad_sync's two CPU paths on the same gradients,
// side by side in one run — the c10d Gloo all-reduce (grad_sync: c10d) and the MPI
// reduce-to-rank-0 + broadcast (mpi; what auto picks on the CPU) — at three gradient sizes (the quickstart model's 0.3
// M values, 4 M and 32 M). Prints the best-of-reps milliseconds per averaging (flatten, collective, finite check,
// scatter back: what a trainer step pays) and their ratio.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <torch/utils.h>

#include "astraflow/comm/comm.hpp"
#include "astraflow/trainer/grad_sync.hpp"

using namespace astraflow;

namespace {

// Best of `reps` (seconds), each run started together on every rank.
template <class Fn>
double best(const Comm& comm, int reps, Fn&& fn) {
  double b = 1e30;
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    const auto t = std::chrono::steady_clock::now();
    fn();
    b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  double worst = 0;  // the slowest rank's best: what the group waits for
  MPI_Allreduce(&b, &worst, 1, MPI_DOUBLE, MPI_MAX, comm.raw());
  return worst;
}

// Parameters with gradients of `total` values, in layers of at most 1 M values.
std::vector<torch::Tensor> parameters(std::int64_t total, int rank) {
  torch::manual_seed(rank + 1);
  std::vector<torch::Tensor> ps;
  for (std::int64_t left = total; left > 0;) {
    const std::int64_t n = std::min<std::int64_t>(left, 1 << 20);
    auto p = torch::zeros({n}).set_requires_grad(true);
    p.mutable_grad() = torch::randn({n});
    ps.push_back(p);
    left -= n;
  }
  return ps;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    Comm comm = Comm::duplicate(MPI_COMM_WORLD);
    torch::set_num_threads(1);
    auto gloo = makeGradientAverager(comm, TrainerSection::GradSync::C10d, torch::kCPU);
    auto mpi = makeGradientAverager(comm, TrainerSection::GradSync::Mpi, torch::kCPU);
    if (comm.rank() == 0) {
      std::printf("grad_sync on %d ranks (best of %d; ms per averaging, slowest rank)\n", comm.size(), reps);
      std::printf("%12s %12s %12s %12s\n", "values", "gloo_ms", "mpi_ms", "mpi/gloo");
    }
    for (std::int64_t total : {std::int64_t{300'000}, std::int64_t{4'000'000}, std::int64_t{32'000'000}}) {
      auto ps = parameters(total, comm.rank());
      const double g = best(comm, reps, [&] { gloo->average(ps, true); });
      const double m = best(comm, reps, [&] { mpi->average(ps, true); });
      if (comm.rank() == 0)
        std::printf("%12lld %12.2f %12.2f %12.2f\n", static_cast<long long>(total), g * 1e3, m * 1e3, m / g);
    }
  }
  MPI_Finalize();
  return 0;
}
