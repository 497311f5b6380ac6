// ZeRO-1's collectives over MPI, and the choice between MPI and c10d.
#include "astraflow/trainer/group_collectives.hpp"

#include <fmt/format.h>

#include <climits>

#include "astraflow/comm/mpi.hpp"
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
    run(t, [&](void* data, int count, MPI_Datatype type) {
      ASTRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, count, type, MPI_SUM, group_.raw()));
    });
  }
  void reduce(torch::Tensor& t, int root) override {
    run(t, [&](void* data, int count, MPI_Datatype type) {
      if (group_.rank() == root) {
        ASTRA_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, data, count, type, MPI_SUM, root, group_.raw()));
      } else {
        ASTRA_MPI_CHECK(MPI_Reduce(data, nullptr, count, type, MPI_SUM, root, group_.raw()));
      }
    });
  }
  void broadcast(torch::Tensor& t, int root) override {
    run(t, [&](void* data, int count, MPI_Datatype type) {
      ASTRA_MPI_CHECK(MPI_Bcast(data, count, type, root, group_.raw()));
    });
  }
  void allgather(torch::Tensor& full) override {
    run(full, [&](void* data, int count, MPI_Datatype type) {
      ASTRA_MPI_CHECK(
          MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count / group_.size(), type, group_.raw()));
    });
  }
  void reduceScatter(torch::Tensor& full, torch::Tensor& out) override {
    torch::Tensor host_out = out.is_cpu() && out.is_contiguous() ? out : torch::empty_like(out, torch::kCPU);
    run(full, [&](void* data, int count, MPI_Datatype type) {
      ASTRA_MPI_CHECK(
          MPI_Reduce_scatter_block(data, host_out.data_ptr(), count / group_.size(), type, MPI_SUM, group_.raw()));
    });
    if (!host_out.is_same(out)) out.copy_(host_out);
  }
  const char* name() const override { return "mpi"; }
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }

 private:
  template <class Op>
  void run(torch::Tensor& t, Op&& op) {
    if (t.numel() > INT_MAX) throw Error(fmt::format("ZeRO over MPI: a buffer of {} values, past 2^31", t.numel()));
    const bool staged = !t.is_cpu() || !t.is_contiguous();
    torch::Tensor host = staged ? t.to(torch::kCPU).contiguous() : t;
    MPI_Datatype type = MPI_FLOAT;
    if (host.scalar_type() == torch::kFloat64) {
      type = MPI_DOUBLE;
    } else if (host.scalar_type() != torch::kFloat32) {
      throw Error("ZeRO over MPI: only float32 and float64 buffers");
    }
    op(host.data_ptr(), static_cast<int>(host.numel()), type);
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
