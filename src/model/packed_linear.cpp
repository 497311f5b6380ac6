// PackedLinear: weights packed once with MKL's cblas_sgemm_pack, products computed from the packed
// form with cblas_sgemm_compute; the MKL entry points found in the process at run time.
#include "model/packed_linear.hpp"

#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "astraflow/core/error.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow::model_detail {
namespace {

// CBLAS's enumerators (mkl_cblas.h), for the LP64 interface (MKL_INT = int).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kPacked = 151, kBMatrix = 162;

struct MklPacked {
  using GetSize = std::size_t (*)(int identifier, int m, int n, int k);
  using Pack = void (*)(int layout, int identifier, int trans, int m, int n, int k, float alpha, const float* src,
                        int ld, float* dest);
  using Compute = void (*)(int layout, int transa, int transb, int m, int n, int k, const float* a, int lda,
                           const float* b, int ldb, float beta, float* c, int ldc);
  GetSize get_size = nullptr;
  Pack pack = nullptr;
  Compute compute = nullptr;
  bool ok() const { return get_size && pack && compute; }
};

const MklPacked& mkl() {
  static const MklPacked m = [] {
    MklPacked f;
    f.get_size = reinterpret_cast<MklPacked::GetSize>(dlsym(RTLD_DEFAULT, "cblas_sgemm_pack_get_size"));
    f.pack = reinterpret_cast<MklPacked::Pack>(dlsym(RTLD_DEFAULT, "cblas_sgemm_pack"));
    f.compute = reinterpret_cast<MklPacked::Compute>(dlsym(RTLD_DEFAULT, "cblas_sgemm_compute"));
    return f;
  }();
  return m;
}

// The row count the layout is asked for: MKL's packed size and form do not depend on it (checked
// at 1, 64 and 256 rows), and a packed matrix computes any number of rows (tested).
constexpr int kPackRows = 64;

int asInt(std::int64_t v, const char* what) {
  if (v <= 0 || v > std::int64_t{1} << 30)
    throw Error(fmt::format("model: packed linear {} {} is out of range", what, v));
  return static_cast<int>(v);
}

}  // namespace

bool packedGemmAvailable() { return mkl().ok(); }

std::uint64_t packedGemmBytes(std::int64_t n, std::int64_t k) {
  if (!packedGemmAvailable()) return 0;
  return mkl().get_size(kBMatrix, kPackRows, asInt(n, "output size"), asInt(k, "input size"));
}

std::vector<PackedLinear::Stamp> PackedLinear::stampsOf(const std::vector<torch::Tensor>& tensors) {
  std::vector<Stamp> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back({t.defined() ? t.data_ptr() : nullptr, t.defined() ? t._version() : 0});
  return out;
}

PackedLinear::PackedLinear(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases) {
  if (!packedGemmAvailable()) throw Error("model: packed weights need MKL's packed sgemm, which this LibTorch lacks");
  if (weights.empty() || biases.size() != weights.size()) {
    throw Error("model: a packed linear takes one or more weights and one bias entry per weight");
  }
  k_ = weights.front().size(1);
  bool any_bias = false;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const auto& w = weights[i];
    if (!w.device().is_cpu() || w.scalar_type() != torch::kFloat32 || w.dim() != 2 || w.size(1) != k_) {
      throw Error("model: packed weights are float32 [n,k] CPU tensors of one k");
    }
    n_ += w.size(0);
    any_bias = any_bias || biases[i].defined();
  }
  // One [Σn, k] source for the stacked product (a copy only when there are several weights;
  // freed once packed).
  const auto stacked = weights.size() == 1 ? weights.front().contiguous() : torch::cat(weights, 0);
  if (any_bias) {
    std::vector<torch::Tensor> parts;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      parts.push_back(biases[i].defined() ? biases[i].to(torch::kFloat32)
                                          : torch::zeros({weights[i].size(0)}, torch::kFloat32));
    }
    bias_ = torch::cat(parts);
  }
  const int n = asInt(n_, "output size"), k = asInt(k_, "input size");
  bytes_ = mkl().get_size(kBMatrix, kPackRows, n, k);
  // 64-byte aligned; the deleter matches the allocator.
  auto* raw = static_cast<float*>(std::aligned_alloc(64, (bytes_ + 63) / 64 * 64));
  if (raw == nullptr) throw Error(fmt::format("model: cannot allocate {} bytes for a packed weight", bytes_));
  packed_ = {raw, [](float* p) { std::free(p); }};
  // op(B) = Wᵀ, k × n, from W row-major [n,k].
  mkl().pack(kRowMajor, kBMatrix, kTrans, kPackRows, n, k, 1.0f, stacked.data_ptr<float>(), k, packed_.get());
  sources_ = std::move(weights);
  for (auto& b : biases) sources_.push_back(std::move(b));
  stamps_ = stampsOf(sources_);
}

// Asked at every product of every step: compared in place, nothing allocated.
bool PackedLinear::current() const {
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const auto& t = sources_[i];
    if (!t.defined()) continue;  // an absent bias stays absent
    if (t.data_ptr() != stamps_[i].data || t._version() != stamps_[i].version) return false;
  }
  return true;
}

torch::Tensor PackedLinear::apply(const torch::Tensor& x_in) const {
  if (x_in.size(-1) != k_ || x_in.scalar_type() != torch::kFloat32 || !x_in.device().is_cpu()) {
    throw Error(fmt::format("model: a packed linear of input size {} takes float32 CPU rows of that size", k_));
  }
  const auto x = x_in.reshape({-1, k_}).contiguous();
  const std::int64_t m = x.size(0);
  auto sizes = x_in.sizes().vec();
  sizes.back() = n_;
  auto y = torch::empty({m, n_}, x.options());
  if (m > 0) {
    mkl().compute(kRowMajor, kNoTrans, kPacked, asInt(m, "row count"), static_cast<int>(n_), static_cast<int>(k_),
                  x.data_ptr<float>(), static_cast<int>(k_), packed_.get(), static_cast<int>(n_), 0.0f,
                  y.data_ptr<float>(), static_cast<int>(n_));
  }
  if (bias_.defined()) y.add_(bias_);
  return y.view(sizes);
}

const PackedLinear* PrepackedWeights::get(std::unique_ptr<PackedLinear>& slot, std::vector<torch::Tensor> weights,
                                          std::vector<torch::Tensor> biases) {
  std::int64_t elements = 0;
  for (const auto& w : weights) elements += w.numel();
  if (elements < min_elements) return nullptr;
  if (!slot || !slot->current()) {
    slot.reset();  // the old packed copy goes before the new one is made
    slot = std::make_unique<PackedLinear>(std::move(weights), std::move(biases));
  }
  return slot.get();
}

std::uint64_t PrepackedWeights::bytes() const {
  std::uint64_t n = head ? head->bytes() : 0;
  for (const auto& l : layers) {
    for (const auto* p : {l.qkv.get(), l.o.get(), l.gate_up.get(), l.down.get()}) n += p ? p->bytes() : 0;
  }
  return n;
}

}  // namespace astraflow::model_detail

namespace astraflow {

// PolicyModelImpl's use of the packed products (policy_model.hpp).
using model_detail::PackedLinear;

void PolicyModelImpl::setPrepackedWeights(bool on, std::int64_t min_elements) {
  if (!on || !model_detail::packedGemmAvailable()) {
    packed_.reset();
    return;
  }
  packed_ = std::make_shared<model_detail::PrepackedWeights>();
  packed_->min_elements = min_elements;
  packed_->layers.resize(layers_.size());
}

std::uint64_t PolicyModelImpl::prepackedBytes() const { return packed_ ? packed_->bytes() : 0; }

const PackedLinear* PolicyModelImpl::packedFor(std::size_t l, Product which, const torch::Tensor& x) const {
  // Inference on the CPU in float32 only: a training forward needs autograd's linear, and
  // autocast or another dtype computes elsewhere.
  if (!packed_ || shards_ || torch::GradMode::is_enabled() || !x.device().is_cpu() ||
      x.scalar_type() != torch::kFloat32 || embed_.scalar_type() != torch::kFloat32 ||
      at::autocast::is_autocast_enabled(at::kCPU)) {
    return nullptr;
  }
  if (which == Product::Head) {
    const auto& w = outputWeight();
    return packed_->get(packed_->head, {w}, {torch::Tensor()});
  }
  const Layer& L = layers_[l];
  auto& slots = packed_->layers[l];
  switch (which) {
    case Product::Qkv: return packed_->get(slots.qkv, {L.q, L.k, L.v}, {L.q_bias, L.k_bias, L.v_bias});
    case Product::O: return packed_->get(slots.o, {L.o}, {L.o_bias});
    case Product::GateUp: return packed_->get(slots.gate_up, {L.gate, L.up}, {L.gate_bias, L.up_bias});
    case Product::Down: return packed_->get(slots.down, {L.down}, {L.down_bias});
    case Product::Head: break;
  }
  return nullptr;
}

torch::Tensor PolicyModelImpl::linearOf(std::size_t l, Product which, const torch::Tensor& x, const torch::Tensor& w,
                                        const torch::Tensor& b) const {
  const auto* packed = packedFor(l, which, x);
  return packed ? packed->apply(x) : torch::linear(x, w, b);
}

std::uint64_t prepackedWeightBytes(const ModelConfig& m, std::int64_t min_elements) {
  const std::int64_t D = m.d_model, hd = m.headDim(), F = m.ffn_hidden;
  auto bytes = [&](std::int64_t n, std::int64_t k) {
    return n * k >= min_elements ? model_detail::packedGemmBytes(n, k) : std::uint64_t{0};
  };
  const std::uint64_t layer =
      bytes((m.heads + 2 * m.kv_heads) * hd, D) + bytes(D, m.heads * hd) + bytes(2 * F, D) + bytes(D, F);
  return static_cast<std::uint64_t>(m.layers) * layer + bytes(m.vocab_size, D);
}

}  // namespace astraflow
