// The simulation keys of the config (docs/simulation.md): a simulated backend's schema (merged
// into layout[i].backend's, backend_schema.cpp) and trainer.simulate.
#include "core/simulation_config.hpp"

#include <fmt/format.h>

#include "astraflow/core/error.hpp"

namespace astraflow::detail {

namespace {

using S = SimulatedBackendSpec;

// lengths: {kind, its parameters, min, max}; each kind takes its own parameters.
void readLengths(YamlReader& r, S& s) {
  if (!r.has("lengths")) return;
  YamlReader l = r.child("lengths");
  s.lengths = l.requireEnum("kind", kSimulatedLengthsNames);
  if (s.lengths == S::Lengths::Fixed || s.lengths == S::Lengths::Geometric)
    s.mean = l.getDouble("mean", s.mean, 1.0, 1e7);
  if (s.lengths == S::Lengths::Lognormal) {
    s.median = l.getDouble("median", s.median, 1.0, 1e7);
    s.sigma = l.getDouble("sigma", s.sigma, 0.0, 10.0);
  }
  if (s.lengths == S::Lengths::Empirical) s.trajectories = l.requireString("trajectories");
  s.min_tokens = static_cast<int>(l.getInt("min", s.min_tokens, 1, 1 << 24, "tokens"));
  s.max_tokens = static_cast<int>(l.getInt("max", s.max_tokens, 1, 1 << 24, "tokens"));
  if (s.max_tokens < s.min_tokens) {
    l.fail("max", fmt::format("given {}; allowed: at least min ({})", s.max_tokens, s.min_tokens));
  }
  l.finish();
}

}  // namespace

const SectionSchema<SimulatedBackendSpec>& simulatedSchema() {
  static const auto schema =
      SectionSchema<S>("layout[i].backend")
          .custom("lengths", "mapping", "`{kind: lognormal, median: 256, sigma: 1.0}`",
                  "`kind: fixed\\|geometric` with `mean`; `lognormal` with `median`, `sigma`; `empirical` with "
                  "`trajectories`; `min` (default 1), `max` (default 4096)",
                  "simulated: generated tokens per episode; `empirical`: a run's `trajectories.h5` (its "
                  "generated-token counts); all clamped to `min` … `max`",
                  readLengths)
          .number("growth_per_version", &S::growth_per_version, 0.0, 100.0, "",
                  "simulated: drawn lengths × (1 + growth × version): a workload whose lengths grow over the run")
          .number("prefill_tokens_per_second", &S::prefill_tokens_per_second, 1e-3, 1e9, "tokens/s",
                  "simulated: an entering prompt costs its tokens at this rate")
          .number("decode_tokens_per_second", &S::decode_tokens_per_second, 1e-3, 1e9, "tokens/s",
                  "simulated: one sequence decoding alone")
          .choice("batching", &S::batching, kBatchingNames,
                  "simulated: continuous (SGLang, vLLM): a sequence that ends frees its slot for the next; static "
                  "(astraflow's own engine): the rows of a batch step together until the longest ends")
          .integer("batch_limit", &S::batch_limit, 1, 1 << 20, "sequences",
                   "simulated: sequences decoding together; more wait for a slot (continuous) or form the next "
                   "batch (static)")
          .number("batch_slowdown", &S::batch_slowdown, 0.0, 10.0, "",
                  "simulated: each decode step is `1 + batch_slowdown × (in flight − 1)` times slower")
          .number("success_rate", &S::success_rate, 0.0, 1.0, "",
                  "simulated: P(reward 1) = min(success_max, success_rate + success_gain_per_version × version)")
          .number("success_gain_per_version", &S::success_gain_per_version, 0.0, 1.0, "",
                  "simulated: the success rate's gain per version")
          .number("success_max", &S::success_max, 0.0, 1.0, "", "simulated: the success rate's cap");
  return schema;
}

void parseTrainerSimulation(YamlReader r, TrainerSection::Simulation& s) {
  s.enabled = true;
  s.fixed_seconds = r.getDouble("fixed_seconds", s.fixed_seconds, 0.0, 86400.0);
  s.seconds_per_token = r.getDouble("seconds_per_token", s.seconds_per_token, 0.0, 3600.0);
  s.weight_bytes = r.getInt("weight_bytes", s.weight_bytes, 0, std::int64_t{1} << 40, "bytes");
  if (s.weight_bytes % 2 != 0) {
    r.fail("weight_bytes", fmt::format("given {}; allowed: an even count (bf16 words)", s.weight_bytes));
  }
  s.changed_fraction = r.getDouble("changed_fraction", s.changed_fraction, 0.0, 1.0);
  r.finish();
}

void checkSimulation(const Config& cfg) {
  if (!cfg.trainer.simulate.enabled) return;
  for (std::size_t i = 0; i < cfg.layout.size(); ++i) {
    const auto& e = cfg.layout[i];
    if (e.role != Role::Rollout || e.backend.isSimulated()) continue;
    throw ConfigError(fmt::format(
        "{}:{}: layout[{}].backend.kind: given {} (pool {}); allowed with trainer.simulate: simulated (a simulated "
        "trainer publishes synthetic bytes, not a model's weights)",
        cfg.source, e.line, i, enumName(kBackendKindNames, e.backend.kind), e.pool));
  }
}

}  // namespace astraflow::detail
