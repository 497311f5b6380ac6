#pragma once
// Factories of the built-in plug-ins that live in files of their own, and a helper the samplers
// share. Private to src/dataflow.
#include <deque>
#include <memory>
#include <vector>

#include "astraflow/dataflow/plugins.hpp"

namespace astraflow {

std::unique_ptr<Sampler> makeReplaySampler(const PluginSpec& spec);
std::unique_ptr<Curator> makeGresoCurator(const PluginSpec& spec);
std::unique_ptr<Curator> makeCurriculumCurator(const PluginSpec& spec);

// Moves ready[i] for every i in `indices` (in that order) into `out`; the rest keep their order.
void takeIndices(std::deque<ReadyGroup>& ready, std::vector<std::size_t> indices, std::vector<ReadyGroup>& out);

}  // namespace astraflow
