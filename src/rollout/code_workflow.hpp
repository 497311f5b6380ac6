#pragma once
// The code workflows (docs/multi-policy.md): solver_testgen and solver_selector over a `dataset`
// environment with the `code` reward, each role's transcript a chat conversation in the policy's
// template. Private to src/rollout; runTeamEpisodes (workflow.hpp) calls it for workflow.chat.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/rollout/workflow.hpp"

namespace astraflow::detail {

std::vector<TeamEpisode> runCodeTeamEpisodes(const WorkflowSection& workflow, const PolicyGenerate& generate,
                                             const Tokenizer& tokenizer, const EnvironmentOptions& env_options,
                                             const std::vector<std::uint64_t>& problem_ids,
                                             const SamplingOptions& sampling);

// The selector's pick: the last <final>A</final> or <final>B</final> (0 or 1); -1 for neither.
int parseFinalPick(std::string_view text);

}  // namespace astraflow::detail
