#pragma once
// Linear layers from weights packed once into MKL's GEMM layout, for the CPU engine in float32
// (PolicyModelImpl::setPrepackedWeights). Private to the model module.
//
// Why: LibTorch's linear hands MKL a fresh weight every call, and MKL repacks it into its
// kernel's panel layout each time. At decode (a few to a few hundred rows against a weight of
// millions) that copy costs about as much as the product: measured 1.5x at 64 rows of a
// 3072x1024 weight and of the 151,936-token head (docs/performance.md). MKL's packed API
// (cblas_sgemm_pack / cblas_sgemm_compute) packs once and computes any number of rows from it.
// The symbols are looked up in the process at run time: a LibTorch built without MKL (another
// architecture) simply never packs.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace astraflow::model_detail {

// MKL's packed sgemm is present in this process.
bool packedGemmAvailable();
// Bytes MKL's packed form of an [n,k] weight takes (0 without MKL); for the memory plan.
std::uint64_t packedGemmBytes(std::int64_t n, std::int64_t k);

// y = x · Wᵀ + b for the rows of several [n_i,k] float32 CPU weights stacked into one product
// (a layer's q, k and v; gate and up): the output's columns are the weights' outputs in order.
class PackedLinear {
 public:
  // `biases`: one per weight, undefined where it has none.
  PackedLinear(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases);
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  // The sources still hold what was packed: same storage and no in-place write since (each
  // tensor's version counter), so a new weight version, copied in or swapped in, repacks.
  bool current() const;
  // x [..., k] float32 → [..., Σ n_i] float32.
  torch::Tensor apply(const torch::Tensor& x) const;
  std::uint64_t bytes() const { return bytes_; }

 private:
  struct Stamp {
    const void* data;
    std::int64_t version;
  };
  static std::vector<Stamp> stampsOf(const std::vector<torch::Tensor>& tensors);

  std::vector<torch::Tensor> sources_;  // weights then biases: handles on the parameters themselves
  std::vector<Stamp> stamps_;
  torch::Tensor bias_;  // [Σ n_i], undefined when no weight has one
  std::int64_t n_ = 0, k_ = 0;
  std::uint64_t bytes_ = 0;
  // MKL's packed matrix: it must not move once packed (its metadata is address-aligned).
  std::unique_ptr<float[], void (*)(float*)> packed_{nullptr, nullptr};
};

// A model's packed products (PolicyModelImpl::setPrepackedWeights), each made on first use and
// remade when its weights change.
struct PrepackedWeights {
  struct Layer {
    std::unique_ptr<PackedLinear> qkv, o, gate_up, down;
  };
  std::int64_t min_elements = 0;
  std::vector<Layer> layers;
  std::unique_ptr<PackedLinear> head;

  // `slot` packing `weights` (and `biases`): null when they are too small to pack.
  const PackedLinear* get(std::unique_ptr<PackedLinear>& slot, std::vector<torch::Tensor> weights,
                          std::vector<torch::Tensor> biases);
  std::uint64_t bytes() const;
};

}  // namespace astraflow::model_detail
