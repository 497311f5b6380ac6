// ZeRO-1's collectives over MPI, and the choice between MPI and c10d.
#include "astraflow/trainer/group_collectives.hpp"

#include <fmt/format.h>

#include <climits>
#include <span>

#include "astraflow/comm/comm.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/trainer/c10d_group.hpp"

namespace astraflow {

namespace {

// Over the group's communicator. A CUDA tensor goes through a host copy (auto never picks MPI
// for a CUDA trainer; an explicit grad_sync: mpi there pays it).
class MpiCollectives final : public GroupCollectives {
 public:
  explicit MpiCollectives(const Comm& group) : group_(group) {}

  void allreduce(torch::Tensor& t) override {
    run(t, [&](auto data) { group_.allreduceSum(data); });
  }
  void reduce(torch::Tensor& t, int root) override {
    run(t, [&](auto data) { group_.reduceSum(data, root); });
  }
  void broadcast(torch::Tensor& t, int root) override {
    run(t, [&](auto data) { group_.broadcast(data, root); });
  }
  void allgather(torch::Tensor& full) override {
    run(full, [&](auto data) { group_.allgatherInPlace(data); });
  }
  void reduceScatter(torch::Tensor& full, torch::Tensor& out) override {
    torch::Tensor host_out = out.is_cpu() && out.is_contiguous() ? out : torch::empty_like(out, torch::kCPU);
    run(full, [&](auto data) {
      using T = typename decltype(data)::element_type;
      if (host_out.scalar_type() != full.scalar_type()) throw Error("ZeRO over MPI: reduce-scatter across dtypes");
      group_.reduceScatterBlock<T>(data, std::span<T>(static_cast<T*>(host_out.data_ptr()), host_out.numel()));
    });
    if (!host_out.is_same(out)) out.copy_(host_out);
  }
  const char* name() const override { return "mpi"; }
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }

 private:
  // `op` gets the tensor's values as a span of float or double, on the host.
  template <class Op>
  void run(torch::Tensor& t, Op&& op) {
    if (t.numel() > INT_MAX) throw Error(fmt::format("ZeRO over MPI: a buffer of {} values, past 2^31", t.numel()));
    const bool staged = !t.is_cpu() || !t.is_contiguous();
    torch::Tensor host = staged ? t.to(torch::kCPU).contiguous() : t;
    const auto n = static_cast<std::size_t>(host.numel());
    if (host.scalar_type() == torch::kFloat32) {
      op(std::span<float>(host.data_ptr<float>(), n));
    } else if (host.scalar_type() == torch::kFloat64) {
      op(std::span<double>(host.data_ptr<double>(), n));
    } else {
      throw Error("ZeRO over MPI: only float32 and float64 buffers");
    }
    if (staged) t.copy_(host);
  }

  const Comm& group_;
};

}  // namespace

void GroupCollectives::allgather(torch::Tensor& full) {
  const auto part = full.numel() / size();
  for (int r = 0; r < size(); ++r) {
    auto slice = full.narrow(0, part * r, part);
    broadcast(slice, r);
  }
}

void GroupCollectives::reduceScatter(torch::Tensor& full, torch::Tensor& out) {
  const auto part = full.numel() / size();
  for (int r = 0; r < size(); ++r) {
    auto slice = full.narrow(0, part * r, part);
    reduce(slice, r);
    if (r == rank()) out.copy_(slice);
  }
}

std::unique_ptr<GroupCollectives> makeGroupCollectives(const Comm& group, TrainerSection::GradSync kind,
                                                       const torch::Device& device) {
  if (gradSyncUsesMpi(kind, device)) return std::make_unique<MpiCollectives>(group);
  return std::make_unique<C10dGroup>(group, device);
}

}  // namespace astraflow
