#pragma once
// Whether every value of a weight or gradient tensor is finite, without a temporary of its size.
// torch::isfinite(t).all() makes several full-size temporaries (abs, two comparisons, their
// and): ~1.1 GB beside a Qwen3-0.6B fp32 embedding, which was the largest transient of a rollout
// rank taking a version and of a checkpoint load (docs/memory.md).
#include <torch/torch.h>

#include <cstddef>
#include <span>

namespace astraflow {

enum class FloatBits { F16, BF16, F32, F64 };

// One pass over the bytes: a value whose exponent bits are all ones is inf or NaN.
bool allFiniteBits(std::span<const std::byte> bytes, FloatBits kind);

// On the CPU, a contiguous float tensor is read by its bits; any other (a device tensor, a
// strided view, an integer type) is checked a bounded slice of rows at a time.
bool allFinite(const torch::Tensor& t);

}  // namespace astraflow
