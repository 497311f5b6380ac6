#pragma once
// Multi-agent workflows (docs/architecture.md §6, docs/multi-policy.md): one team episode runs several
// roles, each on its own policy, and yields one trajectory per role. Every role keeps its own
// transcript: before each of its turns the workflow appends the role's team-context template
// (config `workflow.context`) rendered from the team's state, then the role's policy generates.
// A role's own tokens carry mask 1 and its behaviour log-probs; everything else is context.
//
//   solver_verifier  per round: the solver answers; the verifier approves or rejects
//                    (its turn ends at <approve>/<reject>); a rejection starts the next round with the verdict as
//                    {feedback}, up to workflow.max_rounds. The team's answer is the approved one,
//                    else the first one (a rejection can only replace an answer with an
//                    approved one).
//   solver_selector  the solver writes two candidates (two turns of one transcript, the second
//                    seeing the first); the selector ends its turn with "a" or "b" before
//                    </answer>; the team's answer is the picked candidate (none for any other
//                    output).
//
// Rewards per role (workflow.rewards): team_correct (the team's answer is right), own_correct
// (the solver's own answers: its last one, or the mean over its candidates), verdict_correct
// (the verifier: share of its verdicts that match the truth; a missing verdict counts wrong).
// Answers are scored by the environment, which must be single-turn (arithmetic).
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/rollout/episode.hpp"

namespace astraflow {

struct TeamEpisode {
  std::uint64_t problem_id = 0;
  std::vector<Episode> roles;  // one per workflow role, in workflow.roles order; reward = the role's reward
  double team_reward = 0.0;    // 1 when the team's final answer is right
  int rounds = 0;              // solver turns taken
};

// Generates one turn for a batch of prompts with a policy's current weights (a RaaS rank
// passes its engines; a test can script the outputs). `options` carries the role's stop tokens.
using PolicyGenerate = std::function<std::vector<Generation>(
    const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts, const SamplingOptions& options)>;

// Runs one team episode per problem, batching each role's turn across all unfinished episodes.
std::vector<TeamEpisode> runTeamEpisodes(const WorkflowSection& workflow, const PolicyGenerate& generate,
                                         const Tokenizer& tokenizer, const EnvironmentOptions& env_options,
                                         const std::vector<std::uint64_t>& problem_ids,
                                         const SamplingOptions& sampling);

// A supervised example of one role's first turn (warm-start SFT and its evaluation): the
// tokens the role sees before its turn and the text a perfect role writes. Verifier examples
// show a right or a wrong solution (off by 1–10) with equal odds; selector examples one right
// and one wrong candidate in random order. A judging role works the answer out before it
// decides: "46<reject>", "46b</answer>". Deterministic in (problem_id, rng state).
struct RoleExample {
  Episode prompt;          // <bos> + rendered contexts (+ earlier own turns), mask 0
  std::string reference;   // the reference output, stop tag included ("46</answer>", "<reject>", "b</answer>")
  bool ends_turn = false;  // chat workflows: the turn ends with <eos> (the template's end of turn), trained too
};
// The chat workflows (workflow.chat): the math team on text (solver_verifier) has examples — the
// Solver's is the row's worked solution to the paper's prompt, the Verifier's a verdict on a right
// or a wrong solution (`<verify>approve</verify>` / `<verify>reject</verify>`); the code
// workflows' roles have none (Error).
RoleExample roleExample(const WorkflowSection& workflow, std::size_t role, const Tokenizer& tokenizer,
                        const EnvironmentOptions& env_options, std::uint64_t problem_id, std::mt19937_64& rng);
// Whether a role's output makes the reference's decision: the verifier's verdict, the
// selector's pick, the solver's exact answer.
bool sameDecision(const WorkflowSection& workflow, std::size_t role, const std::string& output,
                  const std::string& reference);
// prompt + reference tokens (mask 1): a trainable SFT episode.
Episode roleReferenceEpisode(const RoleExample& example, const Tokenizer& tokenizer);

// Stop tokens of a role's turns: <eos>, </answer>, and for the verifier <approve>/<reject>.
std::vector<std::int32_t> roleStopIds(const WorkflowSection& workflow, std::size_t role, const Tokenizer& tokenizer);

}  // namespace astraflow
