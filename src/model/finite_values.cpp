// Finite checks without full-size temporaries (include/astraflow/model/finite_values.hpp).
#include "astraflow/model/finite_values.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

namespace astraflow {
namespace {

template <class Bits>
bool exponentsFinite(std::span<const std::byte> bytes, Bits exponent_mask) {
  const std::size_t n = bytes.size() / sizeof(Bits);
  const std::byte* p = bytes.data();
  // Blocks of 64 Ki values: the inner loop vectorises, and a bad value ends the scan early.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = std::min(n, begin + kBlock);
    Bits bad = 0;
    for (std::size_t i = begin; i < end; ++i) {
      Bits v;
      std::memcpy(&v, p + i * sizeof(Bits), sizeof(Bits));
      bad |= static_cast<Bits>((v & exponent_mask) == exponent_mask);
    }
    if (bad != 0) return false;
  }
  return true;
}

std::optional<FloatBits> bitsOf(torch::ScalarType type) {
  switch (type) {
    case torch::kHalf: return FloatBits::F16;
    case torch::kBFloat16: return FloatBits::BF16;
    case torch::kFloat: return FloatBits::F32;
    case torch::kDouble: return FloatBits::F64;
    default: return std::nullopt;
  }
}

}  // namespace

bool allFiniteBits(std::span<const std::byte> bytes, FloatBits kind) {
  switch (kind) {
    case FloatBits::F16: return exponentsFinite<std::uint16_t>(bytes, 0x7c00u);
    case FloatBits::BF16: return exponentsFinite<std::uint16_t>(bytes, 0x7f80u);
    case FloatBits::F32: return exponentsFinite<std::uint32_t>(bytes, 0x7f800000u);
    case FloatBits::F64: return exponentsFinite<std::uint64_t>(bytes, 0x7ff0000000000000ull);
  }
  return true;
}

bool allFinite(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return true;
  const auto kind = bitsOf(t.scalar_type());
  if (kind && t.device().is_cpu() && t.is_contiguous()) {
    const auto* data = static_cast<const std::byte*>(t.const_data_ptr());
    return allFiniteBits({data, static_cast<std::size_t>(t.numel()) * t.element_size()}, *kind);
  }
  if (!t.is_floating_point()) return true;
  if (t.dim() == 0) return torch::isfinite(t).item<bool>();
  // Slices along the first dimension of at most ~4 M values: views, so nothing is copied.
  constexpr std::int64_t kValues = std::int64_t{1} << 22;
  const std::int64_t row = std::max<std::int64_t>(1, t.numel() / t.size(0));
  const std::int64_t rows = std::max<std::int64_t>(1, kValues / row);
  for (std::int64_t r = 0; r < t.size(0); r += rows) {
    if (!torch::isfinite(t.narrow(0, r, std::min(rows, t.size(0) - r))).all().item<bool>()) return false;
  }
  return true;
}

}  // namespace astraflow
