// bench_delta [MiB=64] [reps=5]: the sparse bf16 delta codec against memcpy of the same model
// bytes, measured side by side in one run, at 0.1 %, 1 % and 3 % changed elements (each change
// a step of 1-3 units in the last place, like an optimiser step). Prints GB/s of model bytes for
// memcpy, encode, encode+zstd and apply (checks and checksum included), their ratios to memcpy,
// and bytes per changed element. Single process; no MPI traffic.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "astraflow/weights/delta_codec.hpp"
#include "bench_timing.hpp"

using namespace astraflow;

using bench::best;
using bench::seconds;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::size_t words = mib * (1u << 20) / 2;
  const double gb = static_cast<double>(words * 2) / 1e9;

  std::mt19937 rng(1);
  std::vector<std::uint16_t> base(words);
  for (auto& x : base) x = static_cast<std::uint16_t>((rng() & 0x8000u) | ((0x78u + rng() % 8) << 7) | (rng() & 0x7fu));
  const auto base_bytes = std::as_bytes(std::span(base));
  const std::uint64_t base_hash = weightsHash(base_bytes);

  std::vector<std::uint16_t> copy(words);
  const double t_memcpy = best(reps, [&] { std::memcpy(copy.data(), base.data(), words * 2); });
  const double t_hash = best(reps, [&] { (void)weightsHash(base_bytes); });

  std::printf("bench_delta: %zu MiB of bf16 weights (%zu elements), best of %d\n", mib, words, reps);
  std::printf("memcpy %.2f GB/s, xxh3 checksum %.2f GB/s\n\n", gb / t_memcpy, gb / t_hash);
  std::printf("%-8s %10s %12s %11s %12s %11s %10s %11s %12s %11s %10s\n", "density", "changed", "encode GB/s",
              "vs memcpy", "+zstd GB/s", "vs memcpy", "apply GB/s", "vs memcpy", "B/changed", "zstd B/chg",
              "delta/full");
  for (double density : {0.001, 0.01, 0.03}) {
    std::vector<std::uint16_t> target = base;
    std::bernoulli_distribution pick(density);
    for (auto& x : target) {
      if (pick(rng)) x = static_cast<std::uint16_t>(x + (rng() % 2 ? 1 : -1) * static_cast<int>(1 + rng() % 3));
    }
    const auto target_bytes = std::as_bytes(std::span(target));
    const std::uint64_t target_hash = weightsHash(target_bytes);
    std::vector<std::byte> delta, delta_z;
    DeltaSummary s, sz;
    // The store passes the checksums it already has; so does the benchmark.
    const double t_enc =
        best(reps, [&] { s = encodeDelta(base_bytes, target_bytes, 0, 1, delta, {}, base_hash, target_hash); });
    const double t_enc_z = best(reps, [&] {
      sz = encodeDelta(base_bytes, target_bytes, 0, 1, delta_z, {.zstd = true}, base_hash, target_hash);
    });
    // Apply to a fresh copy of the base each time; the copy is not timed.
    double t_apply = 1e30;
    for (int i = 0; i < reps; ++i) {
      std::memcpy(copy.data(), base.data(), words * 2);
      const double t = seconds();
      applyDelta(std::as_writable_bytes(std::span(copy)), 0, base_hash, delta);
      t_apply = std::min(t_apply, seconds() - t);
    }
    if (copy != target) {
      std::fprintf(stderr, "bench_delta: applied delta is not bit-exact\n");
      return 1;
    }
    const double changed = static_cast<double>(s.changed);
    std::printf("%6.1f %% %10llu %12.2f %10.2fx %12.2f %10.2fx %10.2f %10.2fx %12.2f %11.2f %9.2f%%\n", density * 100,
                static_cast<unsigned long long>(s.changed), gb / t_enc, t_memcpy / t_enc, gb / t_enc_z,
                t_memcpy / t_enc_z, gb / t_apply, t_memcpy / t_apply, static_cast<double>(s.bytes) / changed,
                static_cast<double>(sz.bytes) / changed, 100.0 * static_cast<double>(s.bytes) / (gb * 1e9));
  }
  std::printf("\n(vs memcpy: memcpy time / codec time — 1.00x would be as fast as copying the whole model)\n");
  MPI_Finalize();
  return 0;
}
