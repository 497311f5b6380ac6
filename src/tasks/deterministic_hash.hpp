#pragma once
// Platform-independent mixing for the built-in environments. Problems and corpora must be the
// same on every machine and every run, so nothing here uses <random> distributions (their
// output is implementation-defined).
#include <cstdint>
#include <string_view>

namespace astraflow::detail {

// splitmix64 finaliser (Steele, Lea, Flood 2014): a bijection on 64-bit words whose output
// bits all depend on all input bits.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Folds one more word into a running hash.
constexpr std::uint64_t hashCombine(std::uint64_t seed, std::uint64_t value) {
  return splitmix64(seed ^ splitmix64(value));
}

constexpr std::uint64_t hashString(std::uint64_t seed, std::string_view text) {
  std::uint64_t h = splitmix64(seed ^ text.size());
  for (char c : text) h = hashCombine(h, static_cast<unsigned char>(c));
  return h;
}

// A stream of 64-bit words from one seed (the splitmix64 generator).
class MixStream {
 public:
  explicit constexpr MixStream(std::uint64_t seed) : state_(seed) {}
  constexpr std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return splitmix64(state_);
  }
  // A value in [0, bound). The modulo bias is below bound / 2^64, far under anything a test or
  // a curriculum could notice for the bounds used here (≤ 10^6).
  constexpr std::uint64_t below(std::uint64_t bound) { return next() % bound; }

 private:
  std::uint64_t state_;
};

}  // namespace astraflow::detail
