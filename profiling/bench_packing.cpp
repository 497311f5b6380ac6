// bench_packing RUN_DIR|lognormal:MEDIAN:SIGMA:COUNT [batch=64] [budget=0]: the padding a trainer
// step pays on a real run's sequence lengths (its trajectories.h5) or long-tailed drawn ones, cut into consecutive
// batches of `batch` trajectories (a run's groups_per_step × group_size): the whole batch padded to its longest
// (micro-batching off), the micro-batches of trainer.micro_batch_tokens = budget padded each to its own longest, and
// the same packed (trainer.packing), and — for a run — with each group's shared prompt laid out once
// (trainer.shared_prefix). Prints each layout's forward tokens per sequence token and the padding share, side by side,
// and their ratios.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "astraflow/io/trajectory_writer.hpp"
#include "astraflow/trainer/micro_batches.hpp"

using namespace astraflow;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_packing RUN_DIR|lognormal:MEDIAN:SIGMA:COUNT [batch=64] [budget=0]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::size_t batch = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64;
  const std::int64_t budget = argc > 3 ? std::strtoll(argv[3], nullptr, 10) : 0;
  // The sequence lengths: a run's, or drawn from a lognormal ("lognormal:MEDIAN:SIGMA:COUNT",
  // seed 1, clamped to [8, 16 × MEDIAN]) — the long-tailed shape of agentic RL workloads.
  std::vector<std::int64_t> all_lengths;
  std::vector<TrainingSample> all_episodes;  // a run's: tokens and groups, for the shared-prefix layout
  std::vector<std::int64_t> all_groups;
  if (dir.rfind("lognormal:", 0) == 0) {
    double median = 0, sigma = 0;
    long count = 0;
    if (std::sscanf(dir.c_str(), "lognormal:%lf:%lf:%ld", &median, &sigma, &count) != 3 || median <= 0 || sigma <= 0 ||
        count <= 0) {
      std::fprintf(stderr, "bench_packing: expected lognormal:MEDIAN:SIGMA:COUNT, got %s\n", dir.c_str());
      return 2;
    }
    std::mt19937_64 rng(1);
    std::lognormal_distribution<double> draw(std::log(median), sigma);
    for (long i = 0; i < count; ++i)
      all_lengths.push_back(std::clamp<std::int64_t>(std::llround(draw(rng)), 8, std::llround(16 * median)));
  } else {
    try {
      for (auto& t : io::readTrajectories(dir + "/trajectories.h5")) {
        all_lengths.push_back(static_cast<std::int64_t>(t.tokens.size()));
        all_episodes.emplace_back().tokens = std::move(t.tokens);
        all_groups.push_back(static_cast<std::int64_t>(t.group_id));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_packing: %s\n", e.what());
      return 1;
    }
  }
  std::int64_t sequence = 0, whole = 0, micro_padded = 0, micro_packed = 0, micro_count = 0, packed_count = 0;
  std::int64_t micro_shared = 0, shared_count = 0;
  std::size_t batches = 0;
  for (std::size_t start = 0; start + batch <= all_lengths.size(); start += batch, ++batches) {
    std::vector<std::int64_t> lengths, rows;
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      const auto n = all_lengths[start + i];
      lengths.push_back(n);
      rows.push_back(static_cast<std::int64_t>(i));
      sequence += n;
      longest = std::max(longest, n);
    }
    whole += longest * static_cast<std::int64_t>(batch);
    for (const auto& m : planMicroBatches(rows, lengths, budget, false)) micro_padded += m.cells(), ++micro_count;
    for (const auto& m : planMicroBatches(rows, lengths, budget, true)) micro_packed += m.cells(), ++packed_count;
    if (all_episodes.empty()) continue;
    const auto first = all_episodes.begin() + static_cast<std::ptrdiff_t>(start);
    const auto shared =
        findSharedPrefixes(std::vector<TrainingSample>(first, first + static_cast<std::ptrdiff_t>(batch)),
                           std::vector<std::int64_t>(all_groups.begin() + static_cast<std::ptrdiff_t>(start),
                                                     all_groups.begin() + static_cast<std::ptrdiff_t>(start + batch)));
    for (const auto& m : planMicroBatches(rows, lengths, budget, false, &shared))
      micro_shared += m.cells(), ++shared_count;
  }
  if (batches == 0) {
    std::fprintf(stderr, "bench_packing: %s holds %zu trajectories, fewer than one batch of %zu\n", dir.c_str(),
                 all_lengths.size(), batch);
    return 1;
  }
  // The padding share is of the cells; a shared-prompt layout holds fewer cells than sequence
  // tokens, and its padding is not separable from what the sharing saves ("-").
  auto row = [&](const char* name, std::int64_t cells, std::int64_t passes) {
    char padding[16] = "-";
    if (cells >= sequence)
      std::snprintf(padding, sizeof padding, "%.1f%%",
                    100.0 * (1.0 - static_cast<double>(sequence) / static_cast<double>(cells)));
    std::printf("%-34s %10.3f %10s %12.1f\n", name, static_cast<double>(cells) / static_cast<double>(sequence), padding,
                static_cast<double>(passes) / static_cast<double>(batches));
  };
  std::printf("%s: %zu batches of %zu trajectories, %lld sequence tokens, budget %lld\n", dir.c_str(), batches, batch,
              static_cast<long long>(sequence), static_cast<long long>(budget));
  std::printf("%-34s %10s %10s %12s\n", "layout", "cells/tok", "padding", "passes/batch");
  row("whole batch, padded", whole, static_cast<std::int64_t>(batches));
  row("micro-batches, padded", micro_padded, micro_count);
  row("micro-batches, packed", micro_packed, packed_count);
  std::printf("ratio packed / whole-batch padded cells: %.3f; packed / micro-batch padded: %.3f\n",
              static_cast<double>(micro_packed) / static_cast<double>(whole),
              static_cast<double>(micro_packed) / static_cast<double>(micro_padded));
  if (shared_count > 0) {
    // Below 1 cell per sequence token: the prompts' tokens go through the forward once per group.
    row("micro-batches, shared prompts", micro_shared, shared_count);
    std::printf("ratio shared prompts / micro-batch padded cells: %.3f; / packed: %.3f\n",
                static_cast<double>(micro_shared) / static_cast<double>(micro_padded),
                static_cast<double>(micro_shared) / static_cast<double>(micro_packed));
  }
  return 0;
}
