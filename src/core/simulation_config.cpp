// The simulation keys of the config (docs/simulation.md).
#include "core/simulation_config.hpp"

#include <fmt/format.h>

#include "astraflow/core/error.hpp"

namespace astraflow::detail {

void parseSimulatedBackend(YamlReader& r, SimulatedBackendSpec& s) {
  if (r.has("lengths")) {
    YamlReader l = r.child("lengths");
    const std::string kind = l.requireChoice("kind", {"fixed", "geometric", "lognormal", "empirical"});
    s.lengths = kind == "fixed"       ? SimulatedBackendSpec::Lengths::Fixed
                : kind == "geometric" ? SimulatedBackendSpec::Lengths::Geometric
                : kind == "lognormal" ? SimulatedBackendSpec::Lengths::Lognormal
                                      : SimulatedBackendSpec::Lengths::Empirical;
    if (kind == "fixed" || kind == "geometric") s.mean = l.getDouble("mean", s.mean, 1.0, 1e7);
    if (kind == "lognormal") {
      s.median = l.getDouble("median", s.median, 1.0, 1e7);
      s.sigma = l.getDouble("sigma", s.sigma, 0.0, 10.0);
    }
    if (kind == "empirical") s.trajectories = l.requireString("trajectories");
    s.min_tokens = static_cast<int>(l.getInt("min", s.min_tokens, 1, 1 << 24, "tokens"));
    s.max_tokens = static_cast<int>(l.getInt("max", s.max_tokens, 1, 1 << 24, "tokens"));
    if (s.max_tokens < s.min_tokens) {
      l.fail("max", fmt::format("given {}; allowed: at least min ({})", s.max_tokens, s.min_tokens));
    }
    l.finish();
  }
  s.growth_per_version = r.getDouble("growth_per_version", s.growth_per_version, 0.0, 100.0);
  s.prefill_tokens_per_second = r.getDouble("prefill_tokens_per_second", s.prefill_tokens_per_second, 1e-3, 1e9);
  s.decode_tokens_per_second = r.getDouble("decode_tokens_per_second", s.decode_tokens_per_second, 1e-3, 1e9);
  s.batching = r.getChoice("batching", "continuous", {"continuous", "static"}) == "static"
                   ? SimulatedBackendSpec::Batching::Static
                   : SimulatedBackendSpec::Batching::Continuous;
  s.batch_limit = static_cast<int>(r.getInt("batch_limit", s.batch_limit, 1, 1 << 20, "sequences"));
  s.batch_slowdown = r.getDouble("batch_slowdown", s.batch_slowdown, 0.0, 10.0);
  s.success_rate = r.getDouble("success_rate", s.success_rate, 0.0, 1.0);
  s.success_gain_per_version = r.getDouble("success_gain_per_version", s.success_gain_per_version, 0.0, 1.0);
  s.success_max = r.getDouble("success_max", s.success_max, 0.0, 1.0);
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
