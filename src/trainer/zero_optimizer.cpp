// Sharded data parallelism (docs/training.md): ZeRO-1 and FSDP-style parameter sharding over a
// trainer group, with AdamW's state sharded alike.
#include "astraflow/trainer/zero_optimizer.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <unordered_map>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

namespace {

constexpr std::int64_t kBucket = std::int64_t{1} << 24;  // 64 MiB of fp32 per collective / AdamW chunk

// A zero-filled float32 buffer in pages of its own, unmapped when its last tensor goes. The
// checkpoint's gathers allocate one per parameter, and most parameters are under glibc's mmap
// threshold (which rises to 32 MiB): from its heap, between the HDF5 objects the write keeps, the
// freed buffers stayed resident — +2.8 GiB on the writing rank at the Qwen3-0.6B shape
// (docs/memory.md, measured with bench_trainer_memory --checkpoint). Mapped, each goes back.
torch::Tensor mappedZeros(std::int64_t numel) {
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(numel, 1)) * sizeof(float);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return torch::from_blob(
      p, {numel}, [bytes](void* q) { ::munmap(q, bytes); }, torch::kFloat32);
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(PolicyModelImpl& model, const TrainerSection& config, const Comm& group)
    : model_(model),
      comm_(group),
      group_(makeGroupCollectives(group, config.grad_sync, model.device())),
      config_(config),
      shards_parameters_(config.sharding == TrainerSection::Sharding::Parameters) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.orderedParameters()) params_.push_back(p.tensor);
  partitionUnits();
  const auto [state_total, local_total] = layOutUnits();
  shardBlocks(local_total);
  replicateUnits();
  bindGrads();
  makeAdam(state_total);
  if (shards_parameters_) model_.setParameterShards(this);
}

void ZeroOptimizer::partitionUnits() {
  if (!shards_parameters_) {
    units_.emplace_back();
    for (std::size_t i = 0; i < params_.size(); ++i) units_[0].params.push_back(i);
    return;
  }
  // units_[0]: whatever no block holds (embeddings, final norm, output head); then a unit per
  // block, its parameters in blockParameters() order (the order reduceGradients gets).
  std::unordered_map<const void*, std::size_t> index;
  for (std::size_t i = 0; i < params_.size(); ++i) index[params_[i].unsafeGetTensorImpl()] = i;
  std::vector<bool> in_block(params_.size(), false);
  units_.emplace_back();
  for (int l = 0; l < model_.config().layers; ++l) {
    Unit block;
    block.sharded = true;
    for (const auto& p : model_.blockParameters(static_cast<std::size_t>(l))) {
      const auto i = index.at(p.unsafeGetTensorImpl());
      block.params.push_back(i);
      in_block[i] = true;
    }
    units_.push_back(std::move(block));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!in_block[i]) units_[0].params.push_back(i);
  }
}

std::pair<std::int64_t, std::int64_t> ZeroOptimizer::layOutUnits() {
  const auto size = static_cast<std::int64_t>(comm_.size());
  place_.resize(params_.size());
  std::int64_t state_total = 0, local_total = 0;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    Unit& u = units_[k];
    std::int64_t total = 0;
    for (const auto i : u.params) {
      place_[i] = {k, total};
      u.offsets.push_back(total);
      total += params_[i].numel();
    }
    u.part = std::max<std::int64_t>(1, (total + size - 1) / size);
    u.state_base = state_total;
    state_total += u.part;
    if (u.sharded) {
      u.local_base = local_total;
      local_total += u.part;
    }
  }
  return {state_total, local_total};
}

// The blocks' parts first: the model's block tensors give their storage up before anything
// else is allocated, so set-up peaks at the whole model plus this rank's parts.
void ZeroOptimizer::shardBlocks(std::int64_t local_total) {
  const auto me = static_cast<std::int64_t>(comm_.rank());
  const auto options = params_.front().options().requires_grad(false);
  local_ = torch::zeros({local_total}, options);
  placeholder_ = torch::empty({0}, options);
  for (Unit& u : units_) {
    if (!u.sharded) continue;
    auto mine = partOf(u);
    for (std::size_t j = 0; j < u.params.size(); ++j) {
      auto& p = params_[u.params[j]];
      const auto begin = std::max(u.offsets[j], u.part * me);
      const auto end = std::min(u.offsets[j] + p.numel(), u.part * (me + 1));
      if (begin < end) {
        mine.narrow(0, begin - u.part * me, end - begin)
            .copy_(p.reshape(-1).narrow(0, begin - u.offsets[j], end - begin));
      }
      p.mutable_grad() = torch::Tensor();
      p.set_data(placeholder_);
    }
  }
#if defined(__GLIBC__)
  // The blocks' whole tensors were mostly small enough for the heap (glibc serves allocations
  // below its mmap threshold, which rises to 32 MiB, from it): freed, they would stay resident
  // in its holes. malloc_trim hands those pages back.
  if (shards_parameters_) malloc_trim(0);
#endif
  local_grad_ = torch::zeros_like(local_);
}

// Each replicated parameter's storage moves into its unit's buffer; the parameter (and every
// handle to it: the model's, the optimiser's keys) stays the same tensor.
void ZeroOptimizer::replicateUnits() {
  const auto size = static_cast<std::int64_t>(comm_.size());
  const auto options = params_.front().options().requires_grad(false);
  for (Unit& u : units_) {
    if (u.sharded) continue;
    u.full = torch::zeros({u.part * size}, options);
    for (std::size_t j = 0; j < u.params.size(); ++j) {
      auto& p = params_[u.params[j]];
      auto view = u.full.narrow(0, u.offsets[j], p.numel());
      view.copy_(p.reshape(-1));
      p.set_data(view.view(p.sizes()));
    }
    u.full_grad = torch::zeros_like(u.full);
  }
}

void ZeroOptimizer::makeAdam(std::int64_t state_total) {
  const auto options = params_.front().options().requires_grad(false);
  exp_avg_ = torch::zeros({state_total}, options);
  exp_avg_sq_ = torch::zeros_like(exp_avg_);
  // At most 64 MiB of fp32 per chunk, and at least 4 chunks (small models too take this path).
  const std::int64_t chunk = std::max<std::int64_t>(1, std::min<std::int64_t>(kBucket, (state_total + 3) / 4));
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (const Unit& u : units_) {
    const auto part = partOf(u), grad = gradPartOf(u);
    for (std::int64_t begin = 0; begin < u.part; begin += chunk) {
      const auto n = std::min(chunk, u.part - begin);
      ranges.emplace_back(u.state_base + begin, n);
      chunks_.push_back(part.narrow(0, begin, n));
      chunk_grads_.push_back(grad.narrow(0, begin, n));
    }
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

ZeroOptimizer::~ZeroOptimizer() {
  if (shards_parameters_ && model_.parameterShards() == this) model_.setParameterShards(nullptr);
}

torch::Tensor ZeroOptimizer::partOf(const Unit& u) const {
  return u.sharded ? local_.narrow(0, u.local_base, u.part) : u.full.narrow(0, u.part * group_->rank(), u.part);
}

torch::Tensor ZeroOptimizer::gradPartOf(const Unit& u) const {
  return u.sharded ? local_grad_.narrow(0, u.local_base, u.part)
                   : u.full_grad.narrow(0, u.part * group_->rank(), u.part);
}

bool ZeroOptimizer::step(bool local_loss_finite, double lr, double& grad_norm) {
  torch::NoGradGuard no_grad;
  const auto size = group_->size();
  // A replicated gradient that is not its unit buffer's view (someone reset it) is copied in.
  for (Unit& u : units_) {
    if (u.sharded) continue;
    for (std::size_t j = 0; j < u.params.size(); ++j) {
      const auto& p = params_[u.params[j]];
      const auto& g = p.grad();
      auto slot = u.full_grad.narrow(0, u.offsets[j], p.numel());
      if (!g.defined()) {
        slot.zero_();
      } else if (g.data_ptr() != slot.data_ptr()) {
        slot.copy_(g.reshape(-1));
      }
    }
  }
  bindGrads();
  // The replicated units' reduce-scatter as reduces to each part's owner, a bucket at a time, in
  // place: no part-size or full-size buffer beside the gradients (a whole-buffer
  // reduce_scatter_single costs Gloo a full-size temporary). The other parts' gradients are
  // spent. The sharded units' parts hold their sums already (reduceGradients).
  forEachReplicatedBucket([this](torch::Tensor grads, torch::Tensor, int owner) { group_->reduce(grads, owner); });
  for (const Unit& u : units_) gradPartOf(u).div_(static_cast<double>(size));
  // One small allreduce agrees on the global gradient norm and on whether every rank's loss and
  // gradients were finite (a NaN anywhere makes the sum of squares NaN). The squares are summed
  // chunk by chunk from fp32 norms (no part-size temporary), the sum kept in double.
  double local_sumsq = 0;
  for (const auto& g : chunk_grads_) {
    const double norm = torch::linalg_vector_norm(g, 2, {}, false).item<double>();
    local_sumsq += norm * norm;
  }
  auto agree = torch::tensor({local_sumsq, local_loss_finite ? 0.0 : 1.0},
                             torch::TensorOptions().dtype(torch::kFloat64).device(local_.device()));
  group_->allreduce(agree);
  const auto host = agree.to(torch::kCPU);
  const double sumsq = host[0].item<double>(), bad = host[1].item<double>();
  grad_norm = std::sqrt(sumsq);
  if (bad != 0 || !std::isfinite(sumsq)) return false;
  if (config_.grad_clip > 0) {
    // torch.nn.utils.clip_grad_norm_'s rule: scale by max_norm / (norm + 1e-6) when below 1.
    const double coef = config_.grad_clip / (grad_norm + 1e-6);
    if (coef < 1.0) {
      for (const Unit& u : units_) gradPartOf(u).mul_(coef);
    }
  }
  for (std::size_t i = 0; i < chunks_.size(); ++i) chunks_[i].mutable_grad() = chunk_grads_[i];
  for (auto& g : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  adam_->step();
  for (auto& c : chunks_) c.mutable_grad() = torch::Tensor();
  // Every rank's updated part into every rank's replicated weights: the all-gather as broadcasts
  // from each owner, a bucket at a time, in place. Sharded parts stay where they are: the next
  // gather fetches them.
  forEachReplicatedBucket([this](torch::Tensor, torch::Tensor params, int owner) { group_->broadcast(params, owner); });
  ++steps_;
  return true;
}

void ZeroOptimizer::forEachReplicatedBucket(const std::function<void(torch::Tensor, torch::Tensor, int)>& fn) {
  for (Unit& u : units_) {
    if (u.sharded) continue;
    for (int owner = 0; owner < group_->size(); ++owner) {
      for (std::int64_t begin = 0; begin < u.part; begin += kBucket) {
        const auto at = u.part * owner + begin, n = std::min(kBucket, u.part - begin);
        fn(u.full_grad.narrow(0, at, n), u.full.narrow(0, at, n), owner);
      }
    }
  }
}

void ZeroOptimizer::bindGrads() {
  for (const Unit& u : units_) {
    if (u.sharded) continue;
    for (std::size_t j = 0; j < u.params.size(); ++j) {
      auto& p = params_[u.params[j]];
      auto view = u.full_grad.narrow(0, u.offsets[j], p.numel()).view(p.sizes());
      if (!p.grad().defined() || p.grad().data_ptr() != view.data_ptr()) p.mutable_grad() = view;
    }
  }
}

void ZeroOptimizer::zeroGrad() {
  torch::NoGradGuard no_grad;
  for (Unit& u : units_) {
    if (!u.sharded) u.full_grad.zero_();
  }
  local_grad_.zero_();
  bindGrads();
}

void ZeroOptimizer::gather(std::size_t layer) {
  torch::NoGradGuard no_grad;
  Unit& u = units_.at(1 + layer);
  u.full = torch::empty({u.part * group_->size()}, local_.options());
  u.full.narrow(0, u.part * group_->rank(), u.part).copy_(partOf(u));
  group_->allgather(u.full);
  for (std::size_t j = 0; j < u.params.size(); ++j) {
    const auto i = u.params[j];
    const auto shape = model_.parameterShape(i);
    params_[i].set_data(u.full.narrow(0, u.offsets[j], c10::multiply_integers(shape)).view(shape));
  }
}

void ZeroOptimizer::release(std::size_t layer) {
  Unit& u = units_.at(1 + layer);
  for (const auto i : u.params) params_[i].set_data(placeholder_);
  u.full = torch::Tensor();  // the block's full weights are freed here
}

void ZeroOptimizer::reduceGradients(std::size_t layer, const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  const Unit& u = units_.at(1 + layer);
  if (grads.size() != u.params.size()) {
    throw Error(fmt::format("sharded block {}: {} gradients for {} parameters", layer, grads.size(), u.params.size()));
  }
  auto flat = torch::zeros({u.part * group_->size()}, local_.options());
  for (std::size_t j = 0; j < grads.size(); ++j) {
    if (grads[j].defined()) flat.narrow(0, u.offsets[j], grads[j].numel()).copy_(grads[j].reshape(-1));
  }
  auto summed = torch::empty({u.part}, local_.options());
  group_->reduceScatter(flat, summed);
  gradPartOf(u).add_(summed);  // accumulates over micro-batches, as autograd does
}

void ZeroOptimizer::load(std::size_t index, const torch::Tensor& value) {
  torch::NoGradGuard no_grad;
  if (!units_[place_[index].unit].sharded) {
    params_[index].copy_(value);
    return;
  }
  loadPiece(index, value, [this](const Unit& u) { return partOf(u); });
}

double ZeroOptimizer::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(adam_->param_groups().front().options()).lr();
}

std::uint64_t ZeroOptimizer::stateBytes() const {
  return static_cast<std::uint64_t>(exp_avg_.nbytes() + exp_avg_sq_.nbytes());
}

std::uint64_t ZeroOptimizer::residentBytes() const {
  auto bytes = static_cast<std::uint64_t>(local_.nbytes() + local_grad_.nbytes());
  for (const Unit& u : units_) {
    if (!u.sharded) bytes += static_cast<std::uint64_t>(u.full.nbytes() + u.full_grad.nbytes());
  }
  return bytes;
}

torch::Tensor ZeroOptimizer::gatherToRoot(std::size_t index, const std::function<torch::Tensor(const Unit&)>& part) {
  const int me = comm_.rank();
  const Unit& u = units_[place_[index].unit];
  const auto offset = place_[index].offset;
  const auto shape = model_.parameterShape(index);
  const auto numel = c10::multiply_integers(shape);
  torch::Tensor out;
  if (me == 0) out = mappedZeros(numel);
  for (int r = 0; r < comm_.size(); ++r) {
    const auto begin = std::max(offset, u.part * r), end = std::min(offset + numel, u.part * (r + 1));
    if (begin >= end || (r != me && me != 0)) continue;
    const auto n = end - begin;
    if (n > std::numeric_limits<int>::max()) throw Error("sharded checkpoint: a parameter piece past 2^31 values");
    if (r == me) {
      const auto piece = part(u).narrow(0, begin - u.part * me, n).to(torch::kCPU, torch::kFloat32).contiguous();
      if (me == 0) {
        out.narrow(0, begin - offset, n).copy_(piece);
      } else {
        comm_.send(std::span<const float>(piece.data_ptr<float>(), static_cast<std::size_t>(n)), 0, 0);
      }
    } else {  // rank 0 receives r's piece
      comm_.receive(std::span<float>(out.narrow(0, begin - offset, n).data_ptr<float>(), static_cast<std::size_t>(n)),
                    r, 0);
    }
  }
  return me == 0 ? out.view(shape) : out;
}

void ZeroOptimizer::loadPiece(std::size_t index, const torch::Tensor& value,
                              const std::function<torch::Tensor(const Unit&)>& part) {
  const auto me = static_cast<std::int64_t>(comm_.rank());
  const Unit& u = units_[place_[index].unit];
  const auto offset = place_[index].offset;
  const auto begin = std::max(offset, u.part * me), end = std::min(offset + value.numel(), u.part * (me + 1));
  if (begin < end) {
    part(u).narrow(0, begin - u.part * me, end - begin).copy_(value.reshape(-1).narrow(0, begin - offset, end - begin));
  }
}

torch::Tensor ZeroOptimizer::gatherState(std::size_t index, Moment moment) {
  const torch::Tensor& all = moment == Moment::ExpAvg ? exp_avg_ : exp_avg_sq_;
  return gatherToRoot(index, [&all](const Unit& u) { return all.narrow(0, u.state_base, u.part); });
}

torch::Tensor ZeroOptimizer::gatherParameter(std::size_t index) {
  if (!units_[place_[index].unit].sharded) return comm_.rank() == 0 ? params_[index].detach() : torch::Tensor();
  return gatherToRoot(index, [this](const Unit& u) { return partOf(u); });
}

void ZeroOptimizer::loadState(std::size_t index, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                              std::int64_t step) {
  torch::NoGradGuard no_grad;
  loadPiece(index, exp_avg, [this](const Unit& u) { return exp_avg_.narrow(0, u.state_base, u.part); });
  loadPiece(index, exp_avg_sq, [this](const Unit& u) { return exp_avg_sq_.narrow(0, u.state_base, u.part); });
  for (auto& [key, st] : adam_->state()) static_cast<torch::optim::AdamWParamState&>(*st).step(step);
  steps_ = step;
}

namespace {

// ZeroOptimizer::frozenCopy's shards: per block, this rank's part of the block's flat layout.
class FrozenShards final : public ParameterShards {
 public:
  struct Block {
    std::vector<std::size_t> params;
    std::vector<std::int64_t> offsets;
    std::int64_t part = 0;
    torch::Tensor local, full;
  };
  FrozenShards(PolicyModelImpl& model, GroupCollectives& group, std::vector<Block> blocks)
      : model_(model), group_(group), blocks_(std::move(blocks)) {
    for (const auto& p : model.orderedParameters()) params_.push_back(p.tensor);
    placeholder_ = torch::empty({0}, blocks_.empty() ? torch::TensorOptions() : blocks_.front().local.options());
    for (std::size_t l = 0; l < blocks_.size(); ++l) release(l);
  }
  void gather(std::size_t layer) override {
    torch::NoGradGuard no_grad;
    Block& b = blocks_.at(layer);
    b.full = torch::empty({b.part * group_.size()}, b.local.options());
    b.full.narrow(0, b.part * group_.rank(), b.part).copy_(b.local);
    group_.allgather(b.full);
    for (std::size_t j = 0; j < b.params.size(); ++j) {
      const auto shape = model_.parameterShape(b.params[j]);
      params_[b.params[j]].set_data(b.full.narrow(0, b.offsets[j], c10::multiply_integers(shape)).view(shape));
    }
  }
  void release(std::size_t layer) override {
    for (const auto i : blocks_.at(layer).params) params_[i].set_data(placeholder_);
    blocks_[layer].full = torch::Tensor();
  }
  void reduceGradients(std::size_t, const std::vector<torch::Tensor>&) override {
    throw Error("the KL reference is frozen: it has no gradients to reduce");
  }
  void load(std::size_t, const torch::Tensor&) override {
    throw Error("the KL reference is frozen: it takes its values from the trainer when it is made");
  }

 private:
  PolicyModelImpl& model_;
  GroupCollectives& group_;
  std::vector<Block> blocks_;
  std::vector<torch::Tensor> params_;
  torch::Tensor placeholder_;
};

}  // namespace

std::unique_ptr<ParameterShards> ZeroOptimizer::frozenCopy(PolicyModelImpl& reference) const {
  if (!shards_parameters_) throw Error("ZeroOptimizer::frozenCopy: the trainer's parameters are not sharded");
  torch::NoGradGuard no_grad;
  std::vector<FrozenShards::Block> blocks;
  for (std::size_t u = 1; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    blocks.push_back({unit.params, unit.offsets, unit.part, partOf(unit).clone(), {}});
  }
  auto shards = std::make_unique<FrozenShards>(reference, *group_, std::move(blocks));
  reference.setParameterShards(shards.get());
  return shards;
}

}  // namespace astraflow
