#pragma once
// The chat workflows (docs/multi-policy.md): solver_testgen and solver_selector over a `dataset`
// environment with the `code` reward, solver_verifier over a `dataset` with a text reward; each
// role's transcript a chat conversation in the policy's template. Private to src/rollout;
// runTeamEpisodes (workflow.hpp) calls it for workflow.chat.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astraflow/rollout/workflow.hpp"

namespace astraflow::detail {

std::vector<TeamEpisode> runCodeTeamEpisodes(const WorkflowSection& workflow, const PolicyGenerate& generate,
                                             const Tokenizer& tokenizer, const EnvironmentOptions& env_options,
                                             const std::vector<std::uint64_t>& problem_ids,
                                             const SamplingOptions& sampling);

// A warm-start example of the math team on text (solver_verifier): the role's first turn as the
// team opens it, and what a perfect role writes — the Solver the row's worked solution, the
// Verifier `<verify>approve</verify>` for it or `<verify>reject</verify>` for a copy whose boxed
// answer is wrong (equal odds). The turn ends at the template's end of turn (ends_turn). Error for
// the code workflows, whose roles have no reference outputs.
RoleExample chatRoleExample(const WorkflowSection& workflow, std::size_t role, const Tokenizer& tokenizer,
                            const EnvironmentOptions& env_options, std::uint64_t problem_id, std::mt19937_64& rng);

// The selector's pick: the last <final>A</final> or <final>B</final> (0 or 1); -1 for neither.
int parseFinalPick(std::string_view text);

// The verifier's verdict: true for approve, false for reject (the last <verify>…</verify>, spaces
// and case aside; without one, the bare word when only one of the two appears); nullopt for none.
std::optional<bool> parseVerdict(std::string_view text);

// A math problem without the answer-format request datasets append ("Let's think step by step
// and output the final answer within \boxed{}."): the team prompts' {task_description}.
std::string withoutFormatSuffix(const std::string& problem);

}  // namespace astraflow::detail
