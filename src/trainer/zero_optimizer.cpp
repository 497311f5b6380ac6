// ZeRO-1 (docs/training.md): sharded AdamW state over a c10d group.
#include "astraflow/trainer/zero_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

ZeroOptimizer::ZeroOptimizer(PolicyModelImpl& model, const TrainerSection& config, const Comm& group)
    : comm_(group), group_(makeGroupCollectives(group, config.grad_sync, model.device())), config_(config) {
  torch::NoGradGuard no_grad;
  std::int64_t total = 0;
  for (const auto& p : model.orderedParameters()) {
    params_.push_back(p.tensor);
    offsets_.push_back(total);
    total += p.tensor.numel();
  }
  const auto size = static_cast<std::int64_t>(group.size());
  shard_ = (total + size - 1) / size;
  flat_ = torch::zeros({shard_ * size}, params_.front().options().requires_grad(false));
  // Each parameter's storage moves into the flat buffer; the parameter (and every handle to it:
  // the model's, the optimiser's keys) stays the same tensor.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto view = flat_.narrow(0, offsets_[i], params_[i].numel());
    view.copy_(params_[i].reshape(-1));
    params_[i].set_data(view.view(params_[i].sizes()));
  }
  flat_grad_ = torch::zeros_like(flat_);
  bindGrads();
  shard_param_ = flat_.narrow(0, shard_ * group.rank(), shard_);
  exp_avg_ = torch::zeros_like(shard_param_);
  exp_avg_sq_ = torch::zeros_like(shard_param_);
  // At most 64 MiB of fp32 per chunk, and at least 4 chunks (small models too take this path).
  const std::int64_t chunk = std::max<std::int64_t>(1, std::min<std::int64_t>(std::int64_t{1} << 24, (shard_ + 3) / 4));
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::int64_t begin = 0; begin < shard_; begin += chunk) {
    ranges.emplace_back(begin, std::min(chunk, shard_ - begin));
    chunks_.push_back(shard_param_.narrow(0, begin, ranges.back().second));
  }
  torch::optim::AdamWOptions opts(config_.lr);
  opts.betas({config_.beta1, config_.beta2});
  opts.weight_decay(config_.weight_decay);
  adam_ = std::make_unique<torch::optim::AdamW>(chunks_, opts);
  // AdamW updates its state in place, so state made here (as AdamW makes it: step 0, zeros) stays
  // a view of the two buffers the checkpoint code reads and writes.
  for (std::size_t i = 0; i < chunks_.size(); ++i) {
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(0);
    st->exp_avg(exp_avg_.narrow(0, ranges[i].first, ranges[i].second));
    st->exp_avg_sq(exp_avg_sq_.narrow(0, ranges[i].first, ranges[i].second));
    adam_->state()[chunks_[i].unsafeGetTensorImpl()] = std::move(st);
  }
}

bool ZeroOptimizer::step(bool local_loss_finite, double lr, double& grad_norm) {
  torch::NoGradGuard no_grad;
  const auto size = group_->size();
  // A gradient that is not the flat buffer's view (someone reset it) is copied in.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& g = params_[i].grad();
    auto slot = flat_grad_.narrow(0, offsets_[i], params_[i].numel());
    if (!g.defined()) {
      slot.zero_();
    } else if (g.data_ptr() != slot.data_ptr()) {
      slot.copy_(g.reshape(-1));
    }
  }
  bindGrads();
  // The reduce-scatter as reduces to each shard's owner, a bucket at a time, in place: no
  // shard-size or full-size buffer beside the gradients (a whole-buffer reduce_scatter_single
  // costs Gloo a full-size temporary). The other shards' gradients are spent.
  forEachBucket([this](torch::Tensor grads, torch::Tensor, int owner) { group_->reduce(grads, owner); });
  auto mine = flat_grad_.narrow(0, shard_ * group_->rank(), shard_);
  mine.div_(static_cast<double>(size));
  // One small allreduce agrees on the global gradient norm and on whether every rank's loss and
  // gradients were finite (a NaN anywhere makes the sum of squares NaN).
  // The squares are summed chunk by chunk from fp32 norms (no shard-size temporary; a float64
  // copy of a 0.6B model's shard would be 2.4 GB), the sum kept in double.
  double local_sumsq = 0;
  for (std::int64_t begin = 0; begin < shard_; begin += std::int64_t{1} << 24) {
    const double norm =
        torch::linalg_vector_norm(mine.narrow(0, begin, std::min(std::int64_t{1} << 24, shard_ - begin)), 2, {}, false)
            .item<double>();
    local_sumsq += norm * norm;
  }
  auto agree = torch::tensor({local_sumsq, local_loss_finite ? 0.0 : 1.0},
                             torch::TensorOptions().dtype(torch::kFloat64).device(mine.device()));
  group_->allreduce(agree);
  const auto host = agree.to(torch::kCPU);
  const double sumsq = host[0].item<double>(), bad = host[1].item<double>();
  grad_norm = std::sqrt(sumsq);
  if (bad != 0 || !std::isfinite(sumsq)) return false;
  if (config_.grad_clip > 0) {
    // torch.nn.utils.clip_grad_norm_'s rule: scale by max_norm / (norm + 1e-6) when below 1.
    const double coef = config_.grad_clip / (grad_norm + 1e-6);
    if (coef < 1.0) mine.mul_(coef);
  }
  for (std::size_t i = 0, begin = 0; i < chunks_.size(); begin += static_cast<std::size_t>(chunks_[i].numel()), ++i)
    chunks_[i].mutable_grad() = mine.narrow(0, static_cast<std::int64_t>(begin), chunks_[i].numel());
  for (auto& g : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  adam_->step();
  for (auto& c : chunks_) c.mutable_grad() = torch::Tensor();
  // Every rank's updated shard into every rank's weights (the model's parameters view flat_):
  // the all-gather as broadcasts from each owner, a bucket at a time, in place.
  forEachBucket([this](torch::Tensor, torch::Tensor params, int owner) { group_->broadcast(params, owner); });
  ++steps_;
  return true;
}

void ZeroOptimizer::forEachBucket(const std::function<void(torch::Tensor, torch::Tensor, int)>& fn) {
  constexpr std::int64_t kBucket = std::int64_t{1} << 24;  // 64 MiB of fp32 per collective
  for (int owner = 0; owner < group_->size(); ++owner) {
    for (std::int64_t begin = 0; begin < shard_; begin += kBucket) {
      const auto at = shard_ * owner + begin, n = std::min(kBucket, shard_ - begin);
      fn(flat_grad_.narrow(0, at, n), flat_.narrow(0, at, n), owner);
    }
  }
}

void ZeroOptimizer::bindGrads() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto view = flat_grad_.narrow(0, offsets_[i], params_[i].numel()).view(params_[i].sizes());
    if (!params_[i].grad().defined() || params_[i].grad().data_ptr() != view.data_ptr())
      params_[i].mutable_grad() = view;
  }
}

void ZeroOptimizer::zeroGrad() {
  torch::NoGradGuard no_grad;
  flat_grad_.zero_();
  bindGrads();
}

double ZeroOptimizer::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(adam_->param_groups().front().options()).lr();
}

std::uint64_t ZeroOptimizer::stateBytes() const {
  return static_cast<std::uint64_t>(exp_avg_.nbytes() + exp_avg_sq_.nbytes());
}

std::pair<std::int64_t, std::int64_t> ZeroOptimizer::overlap(std::size_t index, int r) const {
  const auto begin = std::max(offsets_[index], shard_ * r);
  const auto end = std::min(offsets_[index] + params_[index].numel(), shard_ * (r + 1));
  return {begin, std::max(begin, end)};
}

ZeroOptimizer::ParamState ZeroOptimizer::gatherState(std::size_t index) {
  ParamState out;
  const int me = comm_.rank();
  const auto& p = params_[index];
  if (me == 0) {
    out.exp_avg = torch::zeros({p.numel()}, torch::kFloat32);
    out.exp_avg_sq = torch::zeros({p.numel()}, torch::kFloat32);
  }
  for (int r = 0; r < comm_.size(); ++r) {
    const auto [begin, end] = overlap(index, r);
    if (begin == end || (r != me && me != 0)) continue;
    const auto n = end - begin;
    if (n > std::numeric_limits<int>::max()) throw Error("ZeRO checkpoint: a parameter piece past 2^31 values");
    for (int which = 0; which < 2; ++which) {
      torch::Tensor target =
          me == 0 ? (which ? out.exp_avg_sq : out.exp_avg).narrow(0, begin - offsets_[index], n) : torch::Tensor();
      if (r == me) {
        const auto piece =
            (which ? exp_avg_sq_ : exp_avg_).narrow(0, begin - shard_ * me, n).to(torch::kCPU).contiguous();
        if (me == 0) {
          target.copy_(piece);
        } else {
          ASTRA_MPI_CHECK(MPI_Send(piece.data_ptr<float>(), static_cast<int>(n), MPI_FLOAT, 0, which, comm_.raw()));
        }
      } else {  // rank 0 receives r's piece
        ASTRA_MPI_CHECK(MPI_Recv(target.data_ptr<float>(), static_cast<int>(n), MPI_FLOAT, r, which, comm_.raw(),
                                 MPI_STATUS_IGNORE));
      }
    }
  }
  if (me == 0) {
    out.exp_avg = out.exp_avg.view(p.sizes());
    out.exp_avg_sq = out.exp_avg_sq.view(p.sizes());
  }
  return out;
}

void ZeroOptimizer::loadState(std::size_t index, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                              std::int64_t step) {
  torch::NoGradGuard no_grad;
  const auto [begin, end] = overlap(index, comm_.rank());
  if (begin < end) {
    const auto from = begin - offsets_[index], to = begin - shard_ * comm_.rank(), n = end - begin;
    exp_avg_.narrow(0, to, n).copy_(exp_avg.reshape(-1).narrow(0, from, n));
    exp_avg_sq_.narrow(0, to, n).copy_(exp_avg_sq.reshape(-1).narrow(0, from, n));
  }
  for (auto& [key, st] : adam_->state()) static_cast<torch::optim::AdamWParamState&>(*st).step(step);
  steps_ = step;
}

}  // namespace astraflow
