// Multi-agent workflows: the `workflow` config section refuses what could not run, naming the
// key; team episodes with scripted policies give exact transcripts, masks and rewards.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/rollout/workflow.hpp"

using namespace astraflow;

namespace {

const char* kTeam = R"(policies:
  - name: solver
  - name: verifier
workflow:
  kind: solver_verifier
  roles: {solver: solver, verifier: verifier}
  order: [solver, verifier]
  context: {solver: "{feedback}{problem}", verifier: "{problem}{solution}<verifier>"}
  rewards: {solver: team_correct, verifier: verdict_correct}
  max_rounds: 3
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver}
  - {role: trainer, policy: verifier}
  - {role: rollout, policies: [solver, verifier], ranks: 2}
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::string configError(const std::string& text) {
  try {
    parseConfig(text, "team.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(WorkflowConfig, SolverVerifierParsesInOrderWithByRoleRouting) {
  const Config c = parseConfig(kTeam, "team.yaml");
  ASSERT_TRUE(c.workflow.multiAgent());
  ASSERT_EQ(c.workflow.roles.size(), 2u);
  EXPECT_EQ(c.workflow.roles[0].name, "solver");
  EXPECT_EQ(c.workflow.roles[1].policy, "verifier");
  EXPECT_EQ(c.workflow.roles[1].reward, RoleReward::VerdictCorrect);
  EXPECT_EQ(c.workflow.roles[1].context, "{problem}{solution}<verifier>");
  EXPECT_EQ(c.workflow.max_rounds, 3);
  EXPECT_EQ(c.dataflow.router.kind, "by_role");
  EXPECT_EQ(c.dataflow.router.params,
            (std::map<std::string, std::string>{{"solver", "solver"}, {"verifier", "verifier"}}));
  // The router built from it sends each role to its policy and a role-less trajectory to its own.
  auto router = makeRouter(c.dataflow.router);
  Trajectory t;
  t.policy = "solver";
  t.role = "verifier";
  EXPECT_EQ(router->route(t, {"solver", "verifier"}), 1);
  t.role = "critic";
  EXPECT_EQ(router->route(t, {"solver", "verifier"}), -1);
  t.role.clear();
  EXPECT_EQ(router->route(t, {"solver", "verifier"}), 0);
}

TEST(WorkflowConfig, BadWorkflowsNameTheKey) {
  struct Case {
    std::string from, to, expect;
  };
  const std::vector<Case> cases = {
      {"kind: solver_verifier", "kind: debate", "workflow.kind"},
      {"kind: solver_verifier", "kind: single", "workflow.roles: belongs to a multi-agent workflow"},
      {"roles: {solver: solver, verifier: verifier}", "roles: {solver: solver, verifier: judge}",
       "workflow.roles.verifier: 'judge' is not a defined policy"},
      {"roles: {solver: solver, verifier: verifier}", "roles: {solver: solver, verifier: verifier, critic: solver}",
       "workflow.roles.critic: 'critic' is not a role of this workflow"},
      {"roles: {solver: solver, verifier: verifier}", "roles: {solver: solver}", "needs a policy for role 'verifier'"},
      {"roles: {solver: solver, verifier: verifier}", "roles: {solver: solver, verifier: solver}",
       "already serves another role"},
      {"order: [solver, verifier]", "order: [solver, critic]", "workflow.order[1]: 'critic' is not a role"},
      {"order: [solver, verifier]", "order: [verifier, solver]", "workflow.order: given [verifier, solver]"},
      {"rewards: {solver: team_correct, verifier: verdict_correct}",
       "rewards: {solver: team_correct, critic: verdict_correct}", "workflow.rewards.critic: 'critic' is not a role"},
      {"rewards: {solver: team_correct, verifier: verdict_correct}",
       "rewards: {solver: verdict_correct, verifier: verdict_correct}",
       "workflow.rewards.solver: given 'verdict_correct'; allowed for the solver role: team_correct, own_correct"},
      {"{feedback}{problem}", "{hint}{problem}", "workflow.context.solver: unknown placeholder {hint}"},
      {"  max_rounds: 3\n", "", "workflow.max_rounds: missing; the solver_verifier workflow loops"},
      {"max_rounds: 3", "max_rounds: 0", "workflow.max_rounds"},
      {"  - {role: rollout, policies: [solver, verifier], ranks: 2}",
       "  - {role: rollout, policies: [solver], ranks: 1}\n  - {role: rollout, policies: [verifier], ranks: 1}",
       "no rollout entry serves every policy of workflow solver_verifier"},
      {"policies:\n", "environment: {name: search}\npolicies:\n",
       "workflow.kind: the solver_verifier workflow needs environment.name: arithmetic, or environment.name: dataset "
       "with a text reward (environment.reward.kind: math, ...); environment.name is 'search'"},
      {"  max_rounds: 3\n", "  max_rounds: 3\n  followup: x\n", "workflow.followup: belongs to the chat workflows"},
      {"layout:", "dataflow: {router: {kind: by_role, critic: solver}}\nlayout:",
       "dataflow.router.critic: 'critic' is not a role of workflow solver_verifier"},
  };
  for (const auto& c : cases) {
    const std::string message = configError(replaced(kTeam, c.from, c.to));
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.to << "\n  gave: " << message;
  }
  // A policy that no role uses would train on nothing.
  std::string extra = replaced(kTeam, "  - name: verifier\n", "  - name: verifier\n  - name: idle\n");
  extra = replaced(extra, "  - {role: trainer, policy: verifier}\n",
                   "  - {role: trainer, policy: verifier}\n  - {role: trainer, policy: idle}\n");
  extra = replaced(extra, "[solver, verifier], ranks: 2", "[solver, verifier, idle], ranks: 2");
  EXPECT_NE(configError(extra).find("policy 'idle' is used by no role"), std::string::npos) << configError(extra);
}

// With two mistakes in one config, the one blamed is the one the section's reading meets first:
// an unknown key before the checks against other sections, a missing role before an undefined
// policy, roles in the kind's order. Null team mappings are empty, as absent ones.
TEST(WorkflowConfig, ChecksRunInTheirOrder) {
  EXPECT_EQ(configError(replaced(kTeam, "rewards: {solver: team_correct, verifier: verdict_correct}", "rewards: ~")),
            "(accepted)");
  EXPECT_NE(configError(replaced(kTeam, "roles: {solver: solver, verifier: verifier}", "roles: {solver: judge}"))
                .find("needs a policy for role 'verifier'"),
            std::string::npos);
  // A typo is offered the keys of a team workflow, and is reported before the unused policy.
  std::string typo = replaced(kTeam, "  context:", "  contxt:");
  typo = replaced(typo, "  - name: verifier\n", "  - name: verifier\n  - name: idle\n");
  typo = replaced(typo, "  - {role: trainer, policy: verifier}\n",
                  "  - {role: trainer, policy: verifier}\n  - {role: trainer, policy: idle}\n");
  typo = replaced(typo, "[solver, verifier], ranks: 2", "[solver, verifier, idle], ranks: 2");
  const std::string typo_error = configError(typo);
  EXPECT_NE(typo_error.find("workflow.contxt"), std::string::npos) << typo_error;
  EXPECT_NE(typo_error.find("context"), std::string::npos) << typo_error;
  // The solver's policy is checked before the verifier's, whatever their names' order.
  const std::string both = configError(
      replaced(kTeam, "roles: {solver: solver, verifier: verifier}", "roles: {verifier: nobody, solver: judge}"));
  EXPECT_NE(both.find("workflow.roles.solver: 'judge'"), std::string::npos) << both;
  // A single workflow's team keys are refused as such, in plain text.
  const std::string single = configError(replaced(kTeam, "kind: solver_verifier", "kind: single"));
  EXPECT_NE(single.find("belongs to a multi-agent workflow (solver_verifier, solver_selector, solver_testgen)"),
            std::string::npos)
      << single;
}

namespace {

// Scripted policies: each call pops the next output text of that policy for each prompt.
struct Script {
  const Tokenizer& tok;
  std::map<std::string, std::deque<std::string>> outputs;
  std::map<std::string, std::vector<std::string>> prompts_seen;

  PolicyGenerate fn() {
    return [this](const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                  const SamplingOptions& options) {
      std::vector<Generation> out;
      for (const auto& p : prompts) {
        prompts_seen[policy].push_back(tok.decode(p));
        EXPECT_FALSE(outputs[policy].empty()) << policy << " asked once too often";
        Generation g;
        g.tokens = tok.encode(outputs[policy].front());
        outputs[policy].pop_front();
        g.logprobs.assign(g.tokens.size(), -0.5f);
        g.stopped = !g.tokens.empty() && std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(),
                                                   g.tokens.back()) != options.stop_token_ids.end();
        out.push_back(g);
      }
      return out;
    };
  }
};

// The tokens of `e` whose mask is 1, decoded.
std::string ownText(const Tokenizer& tok, const Episode& e) {
  std::vector<std::int32_t> own;
  for (std::size_t i = 0; i < e.tokens.size(); ++i) {
    if (e.policy_mask[i]) own.push_back(e.tokens[i]);
  }
  return tok.decode(own);
}

}  // namespace

TEST(Workflow, SolverVerifierRetriesOnRejectAndScoresEachRole) {
  const Config c = parseConfig(kTeam, "team.yaml");
  auto tok = makeTaskTokenizer();
  auto env = makeEnvironment(c.environment);
  const std::uint64_t id = env->trainingId(3);
  const std::string prompt = env->reset(id);
  const std::string right = env->referenceActions()[0];
  const std::string wrong = std::to_string(std::stoll(right) + 1) + "</answer>";

  // Round 1: wrong answer, rejected (a right verdict). Round 2: right answer, approved (right).
  Script s{*tok, {{"solver", {wrong, right}}, {"verifier", {"<reject>", "<approve>"}}}, {}};
  auto team = runTeamEpisodes(c.workflow, s.fn(), *tok, c.environment, {id}, SamplingOptions{});
  ASSERT_EQ(team.size(), 1u);
  EXPECT_EQ(team[0].rounds, 2);
  EXPECT_EQ(team[0].team_reward, 1.0);
  const Episode& solver = team[0].roles[0];
  const Episode& verifier = team[0].roles[1];
  EXPECT_EQ(solver.reward, 1.0);    // team_correct
  EXPECT_EQ(verifier.reward, 1.0);  // both verdicts right
  EXPECT_EQ(solver.turns, 2);
  EXPECT_EQ(tok->decode(solver.tokens), prompt + wrong + "<reject>" + prompt + right);
  EXPECT_EQ(ownText(*tok, solver), wrong + right);
  EXPECT_EQ(tok->decode(verifier.tokens),
            prompt + wrong + "<verifier><reject>" + prompt + right + "<verifier><approve>");
  EXPECT_EQ(ownText(*tok, verifier), "<reject><approve>");
  EXPECT_EQ(solver.tokens.front(), tok->bosId());
  for (std::size_t i = 0; i < solver.tokens.size(); ++i) {
    EXPECT_EQ(solver.behav_logprobs[i], solver.policy_mask[i] ? -0.5f : 0.0f);
  }
  EXPECT_EQ(s.prompts_seen["solver"][1], prompt + wrong + "<reject>" + prompt);  // the retry saw the verdict
}

TEST(Workflow, ApprovedWrongAnswerEndsTheEpisodeAndRoundsAreCapped) {
  const Config c = parseConfig(kTeam, "team.yaml");
  auto tok = makeTaskTokenizer();
  auto env = makeEnvironment(c.environment);
  const std::uint64_t a = env->trainingId(5), b = env->trainingId(6);
  env->reset(a);
  const std::string right_a = env->referenceActions()[0];
  const std::string wrong_a = std::to_string(std::stoll(right_a) + 2) + "</answer>";
  env->reset(b);
  const std::string right_b = env->referenceActions()[0];
  // Episode a: wrong answer approved → team wrong, the verdict wrong. Episode b: right answers
  // rejected three times → capped at max_rounds, the final (last) answer is right, all verdicts wrong.
  // Calls interleave a and b within a round.
  Script s{*tok,
           {{"solver", {wrong_a, right_b, right_b, right_b}}, {"verifier", {"<approve>", "<reject>", "<reject>", "x"}}},
           {}};
  auto team = runTeamEpisodes(c.workflow, s.fn(), *tok, c.environment, {a, b}, SamplingOptions{});
  EXPECT_EQ(team[0].rounds, 1);
  EXPECT_EQ(team[0].team_reward, 0.0);
  EXPECT_EQ(team[0].roles[1].reward, 0.0);
  EXPECT_EQ(team[1].rounds, 3);
  EXPECT_EQ(team[1].team_reward, 1.0);  // nothing approved: the first answer stands
  EXPECT_EQ(team[1].roles[0].reward, 1.0);
  EXPECT_EQ(team[1].roles[1].reward, 0.0);  // two wrong rejections and one missing verdict
  EXPECT_TRUE(s.outputs["solver"].empty());
}

TEST(Workflow, OnlyAnApprovedAnswerReplacesTheFirst) {
  Config c = parseConfig(kTeam, "team.yaml");
  c.workflow.roles[0].reward = RoleReward::OwnCorrect;
  auto tok = makeTaskTokenizer();
  auto env = makeEnvironment(c.environment);
  const std::uint64_t a = env->trainingId(7), b = env->trainingId(8);
  env->reset(a);
  const std::string right_a = env->referenceActions()[0];
  env->reset(b);
  const std::string right_b = env->referenceActions()[0];
  const std::string wrong = "1000</answer>";
  // a: right, rejected; wrong, approved → the team is wrong. b: wrong, rejected; right, rejected;
  // right, rejected → the first (wrong) answer stands, though the solver's last one is right.
  Script s{*tok,
           {{"solver", {right_a, wrong, wrong, right_b, right_b}},
            {"verifier", {"<reject>", "<reject>", "<approve>", "<reject>", "<reject>"}}},
           {}};
  auto team = runTeamEpisodes(c.workflow, s.fn(), *tok, c.environment, {a, b}, SamplingOptions{});
  EXPECT_EQ(team[0].rounds, 2);
  EXPECT_EQ(team[0].team_reward, 0.0);
  EXPECT_EQ(team[0].roles[0].reward, 0.0);  // own_correct: its last answer, wrong
  EXPECT_EQ(team[0].roles[1].reward, 0.0);  // rejected a right answer, approved a wrong one
  EXPECT_EQ(team[1].rounds, 3);
  EXPECT_EQ(team[1].team_reward, 0.0);
  EXPECT_EQ(team[1].roles[0].reward, 1.0);
  EXPECT_DOUBLE_EQ(team[1].roles[1].reward, 1.0 / 3.0);  // one right rejection of three
}

TEST(Workflow, SelectorPicksACandidateAndBothRolesShareItsReward) {
  std::string text = replaced(kTeam, "kind: solver_verifier", "kind: solver_selector");
  text = replaced(text, "roles: {solver: solver, verifier: verifier}", "roles: {solver: solver, selector: verifier}");
  text = replaced(text, "order: [solver, verifier]", "order: [solver, selector]");
  text = replaced(text, "context: {solver: \"{feedback}{problem}\", verifier: \"{problem}{solution}<verifier>\"}",
                  "context: {selector: \"{problem}{candidates}<selector>\"}");
  text = replaced(text, "rewards: {solver: team_correct, verifier: verdict_correct}", "rewards: {solver: own_correct}");
  text = replaced(text, "  max_rounds: 3\n", "");
  const Config c = parseConfig(text, "selector.yaml");
  EXPECT_EQ(c.workflow.candidates, 2);
  auto tok = makeTaskTokenizer();
  auto env = makeEnvironment(c.environment);
  const std::uint64_t a = env->trainingId(1), b = env->trainingId(2);
  env->reset(a);
  const std::string prompt_a = env->reset(a);
  const std::string right_a = env->referenceActions()[0];
  env->reset(b);
  const std::string right_b = env->referenceActions()[0];
  const std::string wrong = "1000</answer>";
  // a: candidates (wrong, right), picks b → right. b: candidates (right, wrong), answers "z" → no pick.
  Script s{*tok, {{"solver", {wrong, right_b, right_a, wrong}}, {"verifier", {"b</answer>", "z</answer>"}}}, {}};
  auto team = runTeamEpisodes(c.workflow, s.fn(), *tok, c.environment, {a, b}, SamplingOptions{});
  EXPECT_EQ(team[0].team_reward, 1.0);
  EXPECT_EQ(team[0].roles[1].reward, 1.0);  // team_correct
  EXPECT_EQ(team[0].roles[0].reward, 0.5);  // own_correct: one of two candidates right
  EXPECT_EQ(team[1].team_reward, 0.0);
  EXPECT_EQ(team[1].roles[1].reward, 0.0);
  EXPECT_EQ(tok->decode(team[0].roles[1].tokens),
            prompt_a + "<candidate>" + wrong + "<candidate>" + right_a + "<selector>b</answer>");
  EXPECT_EQ(tok->decode(team[0].roles[0].tokens), prompt_a + wrong + prompt_a + right_a);
}

TEST(Workflow, RoleExamplesAreDeterministicAndBalanced) {
  const Config c = parseConfig(kTeam, "team.yaml");
  auto tok = makeTaskTokenizer();
  auto env = makeEnvironment(c.environment);
  std::mt19937_64 r1(9), r2(9);
  int approve = 0;
  for (int k = 0; k < 400; ++k) {
    const auto id = env->trainingId(static_cast<std::uint64_t>(k));
    const auto e1 = roleExample(c.workflow, 1, *tok, c.environment, id, r1);
    const auto e2 = roleExample(c.workflow, 1, *tok, c.environment, id, r2);
    ASSERT_EQ(e1.prompt.tokens, e2.prompt.tokens);
    ASSERT_EQ(e1.reference, e2.reference);
    env->reset(id);
    const std::string value = env->referenceActions()[0].substr(0, env->referenceActions()[0].find('<'));
    ASSERT_TRUE(e1.reference == value + "<approve>" || e1.reference == value + "<reject>") << e1.reference;
    approve += e1.reference == value + "<approve>";
    // The shown solution is right exactly when the reference verdict approves.
    const std::string shown = tok->decode(e1.prompt.tokens);
    const bool right = shown.find("=<answer>" + env->referenceActions()[0] + "<verifier>") != std::string::npos;
    ASSERT_EQ(right, e1.reference == value + "<approve>") << shown;
    EXPECT_TRUE(sameDecision(c.workflow, 1, "7" + e1.reference.substr(value.size()), e1.reference));
    EXPECT_FALSE(sameDecision(c.workflow, 1, value, e1.reference));  // no verdict
    const auto full = roleReferenceEpisode(e1, *tok);
    EXPECT_EQ(ownText(*tok, full), e1.reference);
  }
  EXPECT_GT(approve, 150);
  EXPECT_LT(approve, 250);
}
