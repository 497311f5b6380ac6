// bench_delta [MiB=64] [reps=5] [threads=2]: the sparse bf16 delta codec against memcpy of the
// same model bytes, measured side by side in one run, at 0.1 %, 1 % and 3 % changed elements
// (each change a step of 1-3 units in the last place, like an optimiser step). Prints, for one
// thread and for `threads`, the speed of encode, encode+zstd and apply (checks and checksum
// included) as a ratio to memcpy, and bytes per changed element. Single process; no MPI traffic.
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
  const unsigned threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 2;
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

  std::printf("bench_delta: %zu MiB of bf16 weights (%zu elements), best of %d, 1 and %u threads\n", mib, words, reps,
              threads);
  std::printf("memcpy %.2f GB/s, xxh3 checksum %.2f GB/s\n\n", gb / t_memcpy, gb / t_hash);
  std::printf("%-8s %10s | %-27s | %-27s | %-27s | %10s %10s %10s\n", "", "", "encode (x memcpy)",
              "encode+zstd (x memcpy)", "apply (x memcpy)", "", "", "");
  std::printf("%-8s %10s | %8s %8s %9s | %8s %8s %9s | %8s %8s %9s | %10s %10s %10s\n", "density", "changed", "1 thr",
              "N thr", "N thr GB/s", "1 thr", "N thr", "N thr GB/s", "1 thr", "N thr", "N thr GB/s", "B/changed",
              "zstd B/chg", "delta/full");
  for (double density : {0.001, 0.01, 0.03}) {
    std::vector<std::uint16_t> target = base;
    std::bernoulli_distribution pick(density);
    for (auto& x : target) {
      if (pick(rng)) x = static_cast<std::uint16_t>(x + (rng() % 2 ? 1 : -1) * static_cast<int>(1 + rng() % 3));
    }
    const auto target_bytes = std::as_bytes(std::span(target));
    const std::uint64_t target_hash = weightsHash(target_bytes);
    // Encode and apply with `n` threads; the store passes the checksums it already has, and so
    // does the benchmark. Every delta must apply bit-exact.
    struct Times {
      double enc, enc_z, apply;
      DeltaSummary s, sz;
    };
    auto measure = [&](unsigned n) {
      Times r{};
      std::vector<std::byte> delta, delta_z;
      r.enc = best(reps, [&] {
        r.s = encodeDelta(base_bytes, target_bytes, 0, 1, delta, {.threads = n}, base_hash, target_hash);
      });
      r.enc_z = best(reps, [&] {
        r.sz =
            encodeDelta(base_bytes, target_bytes, 0, 1, delta_z, {.zstd = true, .threads = n}, base_hash, target_hash);
      });
      // Apply to a fresh copy of the base each time; the copy is not timed.
      r.apply = 1e30;
      for (int i = 0; i < reps; ++i) {
        std::memcpy(copy.data(), base.data(), words * 2);
        const double t = seconds();
        applyDelta(std::as_writable_bytes(std::span(copy)), 0, base_hash, delta, n);
        r.apply = std::min(r.apply, seconds() - t);
      }
      if (copy != target) {
        std::fprintf(stderr, "bench_delta: applied delta is not bit-exact\n");
        std::exit(1);
      }
      return r;
    };
    const Times one = measure(1), many = measure(threads);
    if (one.s.bytes != many.s.bytes) {
      std::fprintf(stderr, "bench_delta: %u threads encoded %llu bytes, one thread %llu\n", threads,
                   static_cast<unsigned long long>(many.s.bytes), static_cast<unsigned long long>(one.s.bytes));
      return 1;
    }
    const double changed = static_cast<double>(one.s.changed);
    std::printf(
        "%6.1f %% %10llu | %7.2fx %7.2fx %9.2f | %7.2fx %7.2fx %9.2f | %7.2fx %7.2fx %9.2f | %10.2f %10.2f %9.2f%%\n",
        density * 100, static_cast<unsigned long long>(one.s.changed), t_memcpy / one.enc, t_memcpy / many.enc,
        gb / many.enc, t_memcpy / one.enc_z, t_memcpy / many.enc_z, gb / many.enc_z, t_memcpy / one.apply,
        t_memcpy / many.apply, gb / many.apply, static_cast<double>(one.s.bytes) / changed,
        static_cast<double>(many.sz.bytes) / changed, 100.0 * static_cast<double>(one.s.bytes) / (gb * 1e9));
  }
  std::printf("\n(vs memcpy: memcpy time / codec time — 1.00x would be as fast as copying the whole model)\n");
  MPI_Finalize();
  return 0;
}
