// trainer.grad_sync: the c10d process groups (Gloo, NCCL through the CUDA plug-in) and the MPI
// path, behind GradientAverager.
#include "astraflow/trainer/grad_sync.hpp"

#include "astraflow/model/finite_values.hpp"
#include "astraflow/trainer/c10d_group.hpp"
#include "astraflow/trainer/data_parallel.hpp"
#include "astraflow/trainer/group_collectives.hpp"

namespace astraflow {

namespace {

// Every gradient in one flat float32 buffer on the parameters' device, then one slot for the
// count of ranks whose loss was not finite: one collective per step.
torch::Tensor flatten(const std::vector<torch::Tensor>& parameters, bool local_loss_finite,
                      const torch::Device& device) {
  std::int64_t total = 1;
  for (const auto& p : parameters) total += p.numel();
  auto flat = torch::zeros({total}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  std::int64_t offset = 0;
  for (const auto& p : parameters) {
    if (p.grad().defined()) flat.narrow(0, offset, p.numel()).copy_(p.grad().reshape(-1));
    offset += p.numel();
  }
  flat[total - 1] = local_loss_finite ? 0.0f : 1.0f;
  return flat;
}

// The summed buffer back into the gradients, divided by the group size; whether all was finite.
bool unflatten(const torch::Tensor& flat, const std::vector<torch::Tensor>& parameters, int group_size) {
  const auto total = flat.numel();
  const bool all_finite = flat[total - 1].item<float>() == 0.0f && allFinite(flat);
  flat.narrow(0, 0, total - 1).div_(static_cast<float>(group_size));
  std::int64_t offset = 0;
  for (const auto& p : parameters) {
    auto slice = flat.narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slice);
    } else {
      p.mutable_grad() = slice.clone();
    }
    offset += p.numel();
  }
  return all_finite;
}

class MpiAverager final : public GradientAverager {
 public:
  explicit MpiAverager(const Comm& group) : group_(group) {}
  bool average(const std::vector<torch::Tensor>& parameters, bool local_loss_finite) override {
    return averageGradients(parameters, local_loss_finite, group_);
  }
  const char* backend() const override { return "mpi"; }

 private:
  const Comm& group_;
};

// An allreduce (sum) of the one flat buffer over a c10d group, then the mean.
class C10dAverager final : public GradientAverager {
 public:
  C10dAverager(const Comm& group, const torch::Device& device) : group_(group, device), device_(device) {}

  bool average(const std::vector<torch::Tensor>& parameters, bool local_loss_finite) override {
    torch::NoGradGuard no_grad;
    auto flat = flatten(parameters, local_loss_finite, device_);
    group_.allreduce(flat);
    return unflatten(flat, parameters, group_.size());
  }
  const char* backend() const override { return group_.name(); }

 private:
  C10dGroup group_;
  torch::Device device_;
};

}  // namespace

std::unique_ptr<GradientAverager> makeGradientAverager(const Comm& group, TrainerSection::GradSync kind,
                                                       const torch::Device& device) {
  if (gradSyncUsesMpi(kind, device)) return std::make_unique<MpiAverager>(group);
  return std::make_unique<C10dAverager>(group, device);
}

}  // namespace astraflow
