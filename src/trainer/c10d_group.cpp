// The c10d process group behind trainer.grad_sync c10d and ZeRO sharding: rendezvous through a
// TCPStore whose address rank 0 shares over MPI, then a Gloo or NCCL backend.
#include "astraflow/trainer/c10d_group.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <array>
#include <cstdlib>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/model/cuda_plugin_abi.hpp"
#include "astraflow/model/device.hpp"

namespace astraflow {

namespace {

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
      throw Error("trainer c10d group: gethostname failed; set ASTRAFLOW_C10D_HOST");
    }
    options.isServer = true;
    options.port = 0;  // an ephemeral port: several groups (policies) on one node never collide
    store = c10::make_intrusive<c10d::TCPStore>(host.data(), options);
    port = store->getPort();
  }
  host = group.broadcastValue(0, host);
  port = group.broadcastValue(0, port);
  if (group.rank() != 0) {
    options.port = port;
    store = c10::make_intrusive<c10d::TCPStore>(host.data(), options);
  }
  return store;
}

}  // namespace

struct C10dGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;  // outlives the backend that talks through it
  c10::intrusive_ptr<c10d::Backend> backend;
  const char* name = "gloo";
};

C10dGroup::C10dGroup(const Comm& group, const torch::Device& device)
    : impl_(std::make_unique<Impl>()), rank_(group.rank()), size_(group.size()) {
  try {
    impl_->store = rendezvous(group);
    if (device.is_cpu()) {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      impl_->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank_, size_, options);
      impl_->name = "gloo";
    } else {
      auto make = reinterpret_cast<AstraflowMakeNcclBackendFn>(cudaPluginSymbol(kAstraflowMakeNcclBackend));
      if (!make) throw Error(fmt::format("no NCCL backend: {}", cudaUnavailableReason()));
      std::array<char, 512> error{};
      c10d::Backend* raw = make(impl_->store.get(), rank_, size_, device.index(), error.data(), error.size());
      if (!raw) throw Error(fmt::format("NCCL backend: {}", error.data()));
      impl_->backend = c10::intrusive_ptr<c10d::Backend>::reclaim(raw);
      impl_->name = "nccl";
    }
  } catch (const c10::Error& e) {
    throw Error(
        fmt::format("trainer c10d group: the group of {} ranks could not form: {}", size_, e.what_without_backtrace()));
  }
}

C10dGroup::~C10dGroup() {
  try {
    if (impl_->backend) impl_->backend->shutdown();  // NCCL: tear the communicator down before exit
  } catch (const std::exception& e) {
    spdlog::warn("trainer c10d group: {} shutdown failed: {}", impl_->name, e.what());
  }
}

void C10dGroup::allreduce(torch::Tensor& t) {
  std::vector<torch::Tensor> buffers{t};
  impl_->backend->allreduce(buffers)->wait();
}

void C10dGroup::reduce(torch::Tensor& t, int root) {
  std::vector<torch::Tensor> buffers{t};
  c10d::ReduceOptions options;
  options.rootRank = root;
  impl_->backend->reduce(buffers, options)->wait();
}

void C10dGroup::broadcast(torch::Tensor& t, int root) {
  std::vector<torch::Tensor> buffers{t};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->backend->broadcast(buffers, options)->wait();
}

const char* C10dGroup::name() const { return impl_->name; }

}  // namespace astraflow
