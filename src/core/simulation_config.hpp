#pragma once
// Parsing of the simulation keys (docs/simulation.md): a rollout pool's `backend: {kind:
// simulated, …}` and `trainer.simulate`. Private to src/core.
#include "astraflow/core/config.hpp"
#include "core/section_schemas.hpp"
#include "core/yaml_reader.hpp"

namespace astraflow::detail {

// The trainer.simulate mapping (its presence turns the simulation on).
void parseTrainerSimulation(YamlReader r, TrainerSection::Simulation& s);
// A simulated trainer publishes synthetic bytes, not a model: every rollout pool must be
// simulated too. Throws ConfigError naming the pool.
void checkSimulation(const Config& cfg);

}  // namespace astraflow::detail
