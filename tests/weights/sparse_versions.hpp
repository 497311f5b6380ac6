#pragma once
// Test versions of a fixed-size bf16 model for the weight-store tests: version v of a model whose
// word i steps by one unit every period_i versions (period 50..249), so about 1 % of the words
// change per version, like an optimiser step on bf16 weights (deltas pay off).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace astraflow::test_support {

inline std::uint32_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

inline std::vector<std::byte> sparseVersion(std::int64_t v, std::uint64_t words) {
  std::vector<std::uint16_t> w(words);
  for (std::uint64_t i = 0; i < words; ++i) {
    const std::uint32_t h = mix(i + 1);
    const std::uint32_t period = 50 + h % 200, phase = (h >> 12) % period;
    w[i] = static_cast<std::uint16_t>(h + (static_cast<std::uint32_t>(v) + phase) / period);
  }
  std::vector<std::byte> out(w.size() * 2);
  std::memcpy(out.data(), w.data(), out.size());
  return out;
}

}  // namespace astraflow::test_support
