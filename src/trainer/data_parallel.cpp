// averageGradients: a trainer group's gradients averaged in one flat float32 buffer by reduce-to-root and broadcast,
// so every rank gets bitwise the same sum, with a count of the ranks whose loss was not finite.
#include "astraflow/trainer/data_parallel.hpp"

#include <cmath>
#include <span>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/model/finite_values.hpp"

namespace astraflow {

bool averageGradients(const std::vector<torch::Tensor>& parameters, bool local_loss_finite, const Comm& comm) {
  torch::NoGradGuard no_grad;
  // One flat float32 buffer: every gradient, then a count of ranks whose loss was not finite.
  std::int64_t total = 1;
  for (const auto& p : parameters) total += p.numel();
  auto flat = torch::zeros({total}, torch::kFloat32);  // host memory: MPI reads it
  std::int64_t offset = 0;
  for (const auto& p : parameters) {
    if (p.grad().defined()) flat.narrow(0, offset, p.numel()).copy_(p.grad().reshape(-1));
    offset += p.numel();
  }
  flat[total - 1] = local_loss_finite ? 0.0f : 1.0f;
  if (total > std::numeric_limits<int>::max()) throw Error("averageGradients: more than 2^31 gradient values");
  const std::span<float> data(flat.data_ptr<float>(), static_cast<std::size_t>(total));
  comm.reduceSum(data, 0);
  comm.broadcast(data, 0);
  const bool all_finite = flat[total - 1].item<float>() == 0.0f && allFinite(flat);
  flat.narrow(0, 0, total - 1).div_(static_cast<float>(comm.size()));
  offset = 0;
  for (const auto& p : parameters) {
    auto slice = flat.narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slice);
    } else {
      p.mutable_grad() = slice.to(p.device(), /*non_blocking=*/false, /*copy=*/true);
    }
    offset += p.numel();
  }
  return all_finite;
}

}  // namespace astraflow
