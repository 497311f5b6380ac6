// The simulated generation backend (docs/simulation.md).
#include "astraflow/rollout/simulated_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "astraflow/core/error.hpp"

namespace astraflow {

SimulatedBackend::SimulatedBackend(const SimulatedBackendSpec& spec, int max_sequence_length, std::int32_t vocab_size,
                                   std::vector<std::int32_t> never_generate, std::uint64_t seed)
    : spec_(spec),
      max_sequence_length_(max_sequence_length),
      vocab_size_(vocab_size),
      never_generate_(std::move(never_generate)),
      rng_(seed) {
  if (spec_.lengths == SimulatedBackendSpec::Lengths::Empirical && spec_.samples.empty()) {
    throw Error("simulated backend: the empirical length distribution holds no lengths (" + spec_.trajectories + ")");
  }
  if (vocab_size_ <= static_cast<std::int32_t>(never_generate_.size())) {
    throw Error("simulated backend: no token id left to generate");
  }
}

int SimulatedBackend::drawLength() {
  double length = 0;
  switch (spec_.lengths) {
    case SimulatedBackendSpec::Lengths::Fixed: length = spec_.mean; break;
    case SimulatedBackendSpec::Lengths::Geometric: {
      // Trials until the first success, p = 1 / mean: support 1, 2, …, mean `mean`.
      std::geometric_distribution<long long> geometric(1.0 / std::max(1.0, spec_.mean));
      length = static_cast<double>(geometric(rng_) + 1);
      break;
    }
    case SimulatedBackendSpec::Lengths::Lognormal: {
      std::lognormal_distribution<double> lognormal(std::log(spec_.median), spec_.sigma);
      length = std::round(lognormal(rng_));
      break;
    }
    case SimulatedBackendSpec::Lengths::Empirical: {
      std::uniform_int_distribution<std::size_t> pick(0, spec_.samples.size() - 1);
      length = spec_.samples[pick(rng_)];
      break;
    }
  }
  length *= 1.0 + spec_.growth_per_version * static_cast<double>(std::max<std::int64_t>(0, version_));
  return static_cast<int>(
      std::clamp(length, static_cast<double>(spec_.min_tokens), static_cast<double>(spec_.max_tokens)));
}

double SimulatedBackend::successRate() const {
  return std::min(spec_.success_max, spec_.success_rate + spec_.success_gain_per_version *
                                                              static_cast<double>(std::max<std::int64_t>(0, version_)));
}

double SimulatedBackend::modeledSeconds(const SimulatedBackendSpec& spec, const std::vector<int>& prompt_tokens,
                                        const std::vector<int>& new_tokens) {
  const std::size_t n = new_tokens.size();
  const std::size_t limit = static_cast<std::size_t>(spec.batch_limit);
  auto stepSeconds = [&](std::size_t in_flight) {
    return (1.0 + spec.batch_slowdown * static_cast<double>(in_flight - 1)) / spec.decode_tokens_per_second;
  };
  double seconds = 0;
  if (spec.batching == SimulatedBackendSpec::Batching::Static) {
    // Rows of batch_limit step together, every row computed, until the longest of them ends.
    for (std::size_t first = 0; first < n; first += limit) {
      const std::size_t last = std::min(n, first + limit);
      int longest = 0;
      for (std::size_t i = first; i < last; ++i) {
        seconds += prompt_tokens[i] / spec.prefill_tokens_per_second;
        longest = std::max(longest, new_tokens[i]);
      }
      seconds += longest * stepSeconds(last - first);
    }
    return seconds;
  }
  std::vector<std::int64_t> left;  // tokens still to decode, per sequence in flight
  std::size_t next = 0;
  auto admit = [&] {
    while (left.size() < limit && next < n) {
      seconds += prompt_tokens[next] / spec.prefill_tokens_per_second;
      if (new_tokens[next] > 0) left.push_back(new_tokens[next]);
      ++next;
    }
  };
  admit();
  while (!left.empty()) {
    // Every sequence in flight gains a token per step until the shortest ends.
    const std::int64_t steps = *std::min_element(left.begin(), left.end());
    seconds += static_cast<double>(steps) * stepSeconds(left.size());
    for (auto& l : left) l -= steps;
    left.erase(std::remove(left.begin(), left.end(), 0), left.end());
    admit();
  }
  return seconds;
}

SimulatedBackend::Row SimulatedBackend::planRow(int prompt_tokens, const SamplingOptions& options) {
  const int room = std::max(0, std::min(options.max_new_tokens, max_sequence_length_ - prompt_tokens));
  const int drawn = drawLength();
  Row row;
  row.length = std::min(drawn, room);
  row.stopped = row.length == drawn && !options.stop_token_ids.empty();
  return row;
}

std::int32_t SimulatedBackend::drawToken() {
  std::uniform_int_distribution<std::int32_t> token(0, vocab_size_ - 1);
  std::int32_t id = token(rng_);
  while (std::find(never_generate_.begin(), never_generate_.end(), id) != never_generate_.end()) id = token(rng_);
  return id;
}

float SimulatedBackend::drawLogprob() {
  std::uniform_real_distribution<float> unit(0.05f, 1.0f);
  return std::log(unit(rng_));  // in [log 0.05, 0]: finite, never positive
}

double SimulatedBackend::drawReward() { return std::bernoulli_distribution(successRate())(rng_) ? 1.0 : 0.0; }

std::vector<Generation> SimulatedBackend::generate(const std::vector<std::vector<std::int32_t>>& prompts,
                                                   const SamplingOptions& options) {
  std::vector<Generation> out(prompts.size());
  std::vector<int> prompt_tokens, new_tokens;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const int prompt = static_cast<int>(prompts[i].size());
    const Row row = planRow(prompt, options);
    Generation& g = out[i];
    g.stopped = row.stopped;
    for (int t = 0; t < row.length; ++t) {
      g.tokens.push_back(drawToken());
      g.logprobs.push_back(drawLogprob());
    }
    if (g.stopped && row.length > 0) g.tokens.back() = options.stop_token_ids.front();
    if (g.stopped) g.reward = drawReward();
    prompt_tokens.push_back(prompt);
    new_tokens.push_back(row.length);
    stats_.generations++;
    stats_.tokens += static_cast<std::uint64_t>(row.length);
  }
  const double seconds = modeledSeconds(spec_, prompt_tokens, new_tokens);
  stats_.modeled_seconds += seconds;
  // A timed sleep: the rank waits as an accelerator-bound one would, using no CPU.
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return out;
}

}  // namespace astraflow
