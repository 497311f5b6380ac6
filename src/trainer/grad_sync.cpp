// trainer.grad_sync: the c10d process groups (Gloo, NCCL through the CUDA plug-in) and the MPI
// path, behind GradientAverager.
#include "astraflow/trainer/grad_sync.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <array>
#include <climits>
#include <cstdlib>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/model/cuda_plugin_abi.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/trainer/data_parallel.hpp"

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
  const bool all_finite = (flat[total - 1] == 0).logical_and(torch::isfinite(flat).all()).item<bool>();
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

// The rendezvous: rank 0's TCPStore address, broadcast over the group.
c10::intrusive_ptr<c10d::TCPStore> rendezvous(const Comm& group) {
  std::array<char, 256> host{};
  std::uint16_t port = 0;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10d::TCPStoreOptions options;
  options.numWorkers = static_cast<std::size_t>(group.size());
  options.waitWorkers = false;  // the process group's own handshake waits for every member
  if (group.rank() == 0) {
    if (const char* env = std::getenv("ASTRAFLOW_C10D_HOST"); env && *env) {
      std::snprintf(host.data(), host.size(), "%s", env);
    } else if (gethostname(host.data(), host.size() - 1) != 0) {
      throw Error("trainer.grad_sync c10d: gethostname failed; set ASTRAFLOW_C10D_HOST");
    }
    options.isServer = true;
    options.port = 0;  // an ephemeral port: several groups (policies) on one node never collide
    store = c10::make_intrusive<c10d::TCPStore>(host.data(), options);
    port = store->getPort();
  }
  ASTRA_MPI_CHECK(MPI_Bcast(host.data(), static_cast<int>(host.size()), MPI_CHAR, 0, group.raw()));
  ASTRA_MPI_CHECK(MPI_Bcast(&port, 1, MPI_UINT16_T, 0, group.raw()));
  if (group.rank() != 0) {
    options.port = port;
    store = c10::make_intrusive<c10d::TCPStore>(host.data(), options);
  }
  return store;
}

class C10dAverager final : public GradientAverager {
 public:
  C10dAverager(const Comm& group, const torch::Device& device) : size_(group.size()), device_(device) {
    try {
      store_ = rendezvous(group);
      if (device.is_cpu()) {
        auto options = c10d::ProcessGroupGloo::Options::create();
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, group.rank(), size_, options);
        name_ = "gloo";
      } else {
        auto make = reinterpret_cast<AstraflowMakeNcclBackendFn>(cudaPluginSymbol(kAstraflowMakeNcclBackend));
        if (!make) throw Error(fmt::format("no NCCL backend: {}", cudaUnavailableReason()));
        std::array<char, 512> error{};
        c10d::Backend* raw = make(store_.get(), group.rank(), size_, device.index(), error.data(), error.size());
        if (!raw) throw Error(fmt::format("NCCL backend: {}", error.data()));
        backend_ = c10::intrusive_ptr<c10d::Backend>::reclaim(raw);
        name_ = "nccl";
      }
    } catch (const c10::Error& e) {
      throw Error(fmt::format("trainer.grad_sync c10d: the group of {} ranks could not form: {}", size_,
                              e.what_without_backtrace()));
    }
  }

  ~C10dAverager() override {
    try {
      if (backend_) backend_->shutdown();  // NCCL: tear the communicator down before exit
    } catch (const std::exception& e) {
      spdlog::warn("trainer.grad_sync: {} shutdown failed: {}", name_, e.what());
    }
  }
  C10dAverager(const C10dAverager&) = delete;
  C10dAverager& operator=(const C10dAverager&) = delete;

  bool average(const std::vector<torch::Tensor>& parameters, bool local_loss_finite) override {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> buffers{flatten(parameters, local_loss_finite, device_)};
    backend_->allreduce(buffers)->wait();
    return unflatten(buffers.front(), parameters, size_);
  }
  const char* backend() const override { return name_; }

 private:
  int size_;
  torch::Device device_;
  const char* name_ = "gloo";
  c10::intrusive_ptr<c10d::TCPStore> store_;  // outlives the backend that talks through it
  c10::intrusive_ptr<c10d::Backend> backend_;
};

}  // namespace

std::unique_ptr<GradientAverager> makeGradientAverager(const Comm& group, TrainerSection::GradSync kind,
                                                       const torch::Device& device) {
  // auto: MPI on the CPU, where it beats Gloo's TCP transport within a node
  // (profiling/bench_grad_sync.cpp); NCCL on CUDA, where gradients stay on the GPU.
  const bool mpi = kind == TrainerSection::GradSync::Mpi || (kind == TrainerSection::GradSync::Auto && device.is_cpu());
  if (mpi) return std::make_unique<MpiAverager>(group);
  return std::make_unique<C10dAverager>(group, device);
}

}  // namespace astraflow
