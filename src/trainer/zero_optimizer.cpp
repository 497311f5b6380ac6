// ZeRO-1 (docs/training.md): sharded AdamW state over a c10d group.
#include "astraflow/trainer/zero_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

ZeroOptimizer::ZeroOptimizer(PolicyModelImpl& model, const TrainerSection& config, const Comm& group)
    : comm_(group), group_(group, model.device()), config_(config) {
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
  torch::optim::AdamWOptions opts(config_.lr);
  opts.betas({config_.beta1, config_.beta2});
  opts.weight_decay(config_.weight_decay);
  adam_ = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{shard_param_}, opts);
}

bool ZeroOptimizer::step(bool local_loss_finite, double lr, double& grad_norm) {
  torch::NoGradGuard no_grad;
  const auto size = group_.size();
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
  auto mine = torch::empty({shard_}, flat_.options());
  group_.reduceScatter(mine, flat_grad_);
  mine.div_(static_cast<double>(size));
  // One small allreduce agrees on the global gradient norm and on whether every rank's loss and
  // gradients were finite (a NaN anywhere makes the sum of squares NaN).
  auto agree = torch::stack({mine.to(torch::kFloat64).square().sum(),
                             torch::full({}, local_loss_finite ? 0.0 : 1.0, mine.options().dtype(torch::kFloat64))});
  group_.allreduce(agree);
  const auto host = agree.to(torch::kCPU);
  const double sumsq = host[0].item<double>(), bad = host[1].item<double>();
  grad_norm = std::sqrt(sumsq);
  if (bad != 0 || !std::isfinite(sumsq)) return false;
  if (config_.grad_clip > 0) {
    // torch.nn.utils.clip_grad_norm_'s rule: scale by max_norm / (norm + 1e-6) when below 1.
    const double coef = config_.grad_clip / (grad_norm + 1e-6);
    if (coef < 1.0) mine.mul_(coef);
  }
  shard_param_.mutable_grad() = mine;
  for (auto& g : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  adam_->step();
  shard_param_.mutable_grad() = torch::Tensor();
  // Every rank's updated shard into every rank's weights (the model's parameters view flat_).
  auto sent = shard_param_.clone();
  group_.allGather(flat_, sent);
  ++steps_;
  return true;
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

torch::optim::AdamWParamState& ZeroOptimizer::shardState() {
  auto& state = adam_->state();
  auto it = state.find(shard_param_.unsafeGetTensorImpl());
  if (it == state.end()) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(steps_);
    s->exp_avg(torch::zeros_like(shard_param_));
    s->exp_avg_sq(torch::zeros_like(shard_param_));
    it = state.emplace(shard_param_.unsafeGetTensorImpl(), std::move(s)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*it->second);
}

std::uint64_t ZeroOptimizer::stateBytes() const {
  std::uint64_t bytes = 0;
  for (const auto& [key, s] : adam_->state()) {
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*s);
    bytes += static_cast<std::uint64_t>(st.exp_avg().nbytes() + st.exp_avg_sq().nbytes());
  }
  return bytes;
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
  auto& st = shardState();
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
            (which ? st.exp_avg_sq() : st.exp_avg()).narrow(0, begin - shard_ * me, n).to(torch::kCPU).contiguous();
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
  auto& st = shardState();
  const auto [begin, end] = overlap(index, comm_.rank());
  if (begin < end) {
    const auto from = begin - offsets_[index], to = begin - shard_ * comm_.rank(), n = end - begin;
    st.exp_avg().narrow(0, to, n).copy_(exp_avg.reshape(-1).narrow(0, from, n));
    st.exp_avg_sq().narrow(0, to, n).copy_(exp_avg_sq.reshape(-1).narrow(0, from, n));
  }
  st.step(step);
  steps_ = step;
}

}  // namespace astraflow
